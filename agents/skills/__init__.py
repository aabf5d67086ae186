"""Skills in the open Agent Skills format: folders with a SKILL.md, found, checked and read.

`frontmatter.py` reads one SKILL.md (pure); `files.py` is the one door to a skill's files;
`skill.py` holds the types; `catalog.py` finds the skills of every source and keeps them fresh;
`listing.py` writes the prompt's skills block. The skills Perch ships live in `bundled/`.
"""
