"""The media wing: attachments into a turn (voice transcribed, documents read or saved) and
files and reactions out to the chats."""
