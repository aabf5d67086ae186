"""Benchmark 11: what the skills cost a turn: the catalog's look at the folders, and the prompt.

Every turn's prompt asks the `SkillCatalog` to refresh: one stat per source folder and one per
SKILL.md while nothing changed, a re-read only of what did. Measured with 20 and 200 skills
(dated back, as skills untouched since an earlier day are): the refresh of an unchanged set,
a whole prompt build with it, and the first look (every SKILL.md read and parsed). Figures
are CPU time (process_time), median of 200 rounds (20 for the first look).

    .venv/bin/python -m bench.skills
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from agents.prompt import PromptBuilder, RuntimeInfo
from agents.skills.catalog import SkillCatalog
from agents.skills.skill import BUNDLED_DIR, SkillSource
from bench.report import Report, parser

RUNTIME = RuntimeInfo(agent_id="main", session_key="agent:main:console:local:dm:o", model="m")
BODY = "## Steps\n" + "".join(f"{i}. Do step {i} of the task carefully.\n" for i in range(60))


def make_skills(root: Path, count: int) -> None:
    skills = root / "skills"
    skills.mkdir(parents=True)
    back = 86_400 * 10**9
    for i in range(count):
        folder = skills / f"skill-{i:03d}"
        folder.mkdir()
        md = folder / "SKILL.md"
        md.write_text(
            f"---\nname: skill-{i:03d}\ndescription: Does task {i}. Use when the user asks for "
            f'task {i}.\nmetadata: {{"openclaw": {{"requires": {{"bins": ["sh"]}}}}}}\n---\n' + BODY
        )
        for path in (md, folder):
            st = path.stat()
            os.utime(path, ns=(st.st_atime_ns - back, st.st_mtime_ns - back))
    st = skills.stat()
    os.utime(skills, ns=(st.st_atime_ns - back, st.st_mtime_ns - back))


def catalog(root: Path) -> SkillCatalog:
    sources = [SkillSource("workspace", root, ("skills",)), SkillSource("bundled", BUNDLED_DIR)]
    return SkillCatalog(sources, workspace=root)


def median_cpu(work: Callable[[], object], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        began = time.process_time()
        work()
        times.append(time.process_time() - began)
    return statistics.median(times)


def main() -> None:
    args = parser(__doc__.splitlines()[0]).parse_args()
    report = Report("skills", "11. Skills: the catalog's refresh and the prompt per turn")
    for count in (20, 200):
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            make_skills(root, count)
            first = median_cpu(lambda root=root: catalog(root).refresh(), 20)  # type: ignore[misc]
            warm = catalog(root)
            warm.refresh()
            unchanged = median_cpu(warm.refresh, 200)
            builder = PromptBuilder(root, skills=warm)
            builder.build("full", RUNTIME)
            prompt = median_cpu(lambda builder=builder: builder.build("full", RUNTIME), 200)  # type: ignore[misc]
            report.add(f"{count} skills, first look (read and parse all)", first * 1e3, "ms")
            report.add(f"{count} skills, refresh, nothing changed", unchanged * 1e6, "µs")
            report.add(f"{count} skills, whole prompt build, nothing changed", prompt * 1e6, "µs")
    report.save(args.json)


if __name__ == "__main__":
    main()
