"""The operator's wing: the `perch` command, the control socket, doctor and onboarding.

Everything a person (or a script) does to a Perch from the shell lives here. The daemon's
core never imports it, except to start the control socket server it is handed.
"""
