"""The search index over memory notes, past conversations and skills, and recall per turn."""
