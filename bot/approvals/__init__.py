"""Approvals for risky tools: who is asked, the card they see, waiting for the answer.

`approver.py` picks who answers (pure), `cards.py` writes what they see and reads their
commands (pure), `broker.py` (`ApprovalBroker`) sends the request, waits for the tap or the
command, keeps the audit in the store and answers the agents' `Approver` port.
"""
