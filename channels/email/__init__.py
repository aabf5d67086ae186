"""Email: a mailbox Perch answers, read over IMAP (IDLE, or polling) and answered over SMTP."""
