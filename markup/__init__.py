"""Markup grammar shared by every room: what both `agents/` and `channels/` must read the same
way (today: code fences, `markup.fences`). Pure functions over strings; imports no Perch room."""
