"""Real skill folders, written the way each dialect writes them, for the skills tests.

`openclaw_skill` is shaped like OpenClaw's bundled skills (a multi-line JSON `metadata` with
trailing commas under `openclaw`, `{baseDir}` in the body, `homepage`, `user-invocable`,
install specs); `nanobot_skill` like nanobot's (one-line JSON `metadata.nanobot`, `always`);
`agentskills_skill` like the public Agent Skills collections (license, compatibility,
string metadata, allowed-tools, scripts/ and references/). `fake_bin` puts an executable on a
folder meant for PATH, so requirements are met the way they are on a real machine.
"""

from __future__ import annotations

import os
from pathlib import Path


def write_skill(root: Path, name: str, text: str, files: dict[str, str] | None = None) -> Path:
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(text, encoding="utf-8")
    for rel, content in (files or {}).items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")
    return folder


def openclaw_skill(root: Path, name: str = "gh-issues", bins: str = '"gh"') -> Path:
    text = f"""---
name: {name}
description: "Triage GitHub issues with the `gh` CLI: list, label and close. Use when the user asks about open issues or wants them sorted."
homepage: https://cli.github.com
user-invocable: true
metadata:
  {{
    "openclaw":
      {{
        "emoji": "\\U0001F419",
        "requires": {{ "bins": [{bins}], "env": ["GH_TOKEN"] }},
        "primaryEnv": "GH_TOKEN",
        "install":
          [
            {{
              "id": "apt",
              "kind": "apt",
              "package": "gh",
              "bins": ["gh"],
              "label": "Install GitHub CLI (apt)",
            }},
          ],
      }},
  }}
---

# GitHub issues

Run `{{baseDir}}/scripts/triage.sh <owner/repo>` to list the open issues, newest first.
Label with `gh issue edit`, close with `gh issue close`.
"""
    return write_skill(root, name, text, {"scripts/triage.sh": "#!/bin/sh\necho triage $1\n"})


def nanobot_skill(
    root: Path, name: str = "tmux-control", always: bool = False, binary: str = "perch-test-tmux"
) -> Path:
    flag = "true" if always else "false"
    text = (
        "---\n"
        f"name: {name}\n"
        'description: "Remote-control tmux sessions: send keys, read pane output."\n'
        f'metadata: {{"nanobot":{{"emoji":"🧵","requires":{{"bins":["{binary}"]}},"always":{flag}}}}}\n'
        "---\n\n"
        "# tmux\n\nUse `tmux send-keys -t <session> '<keys>' Enter`, then "
        "`tmux capture-pane -p -t <session>` to read what happened.\n"
    )
    return write_skill(root, name, text)


def agentskills_skill(root: Path, name: str = "pdf-processing") -> Path:
    text = f"""---
name: {name}
description: >-
  Extract text and tables from PDF files, fill PDF forms and merge documents.
  Use when working with PDF files or when the user mentions PDFs or forms.
license: Apache-2.0
compatibility: Requires python3 and access to the local file system
metadata:
  author: example-org
  version: "1.0"
allowed-tools: Bash(python3:*) Read
---

# PDF processing

## Extracting text
Run `python3 scripts/extract.py input.pdf` from this skill's folder.

For forms, read [the forms guide](references/FORMS.md) first.
"""
    return write_skill(
        root,
        name,
        text,
        {
            "scripts/extract.py": "import sys\nprint('extracted', sys.argv[1:])\n",
            "references/FORMS.md": "# Forms\nFill the fields in page order.\n",
        },
    )


def fake_bin(folder: Path, name: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/sh\necho fake\n")
    os.chmod(path, 0o755)
    return path


def age(path: Path, seconds: float = 60) -> None:
    """Date a file or folder back, as a skill untouched since an earlier day would be."""
    st = path.stat()
    back = int(seconds * 1e9)
    os.utime(path, ns=(st.st_atime_ns - back, st.st_mtime_ns - back), follow_symlinks=False)
