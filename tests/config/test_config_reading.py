"""Reading config.yaml safely and finding it: alias bombs, duplicate keys, YAML 1.1 booleans,
the secrets files Perch loads itself, and which file a command uses."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.config.errors import EXIT_CONFIG, ConfigError
from bot.config.load import load_config
from bot.config.paths import config_path, edited_config_path, template_text
from bot.config.yaml_read import MAX_NODES, YamlProblem, read_yaml

BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 9)}]\n" for i in range(8)
)


def write(folder: Path, text: str, name: str = "config.yaml") -> Path:
    path = folder / name
    path.write_text(text)
    return path


def run_perch(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bot.operator.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env if env is not None else {**os.environ, "ANTHROPIC_API_KEY": "sk-ant-x"},
        timeout=60,
    )


@pytest.mark.timeout(20)  # the bomb used to keep perch run at 100% CPU for minutes
def test_an_alias_bomb_is_refused_with_one_line_and_exit_78(tmp_path: Path) -> None:
    path = write(tmp_path, BOMB)
    with pytest.raises(ConfigError, match=f"expand to more than {MAX_NODES} values"):
        load_config(path, {})
    proc = run_perch("run", "--config", str(path), cwd=tmp_path)
    assert proc.returncode == EXIT_CONFIG
    assert proc.stderr.count("\n") == 1 and "alias bomb" in proc.stderr


def test_a_self_referring_alias_is_refused() -> None:
    with pytest.raises(YamlProblem, match="refers to the value that contains it"):
        read_yaml("a: &a [1, *a]\n")


def test_aliases_within_reason_still_work(tmp_path: Path) -> None:
    text = "channels:\n  console: &on {enabled: true}\nagent:\n  fallbacks: &f [a/b]\n  tools: {deny: *f}\n"
    config = load_config(write(tmp_path, text), {})
    assert config.agent.tools.deny == ["a/b"] and config.channels.console.enabled


def test_a_duplicate_key_names_the_key_and_both_lines(tmp_path: Path) -> None:
    text = "agent:\n  model: a\nheartbeat: {every: 0}\nagent:\n  model: b\n"
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path, text), {})
    message = str(caught.value)
    assert "'agent' is written twice (lines 1 and 4)" in message and "\n" not in message
    nested = "agent:\n  id: x\n  model: a\n  model: b\n"
    with pytest.raises(
        ConfigError, match=r"agent\.model: the key 'model' is written twice \(lines 3 and 4\)"
    ):
        load_config(write(tmp_path, nested), {})


def test_yaml_merge_keys_are_not_duplicates(tmp_path: Path) -> None:
    text = "base: &b {dm_policy: pairing}\n"
    assert read_yaml(text + "x:\n  <<: *b\n  dm_policy: open\n").data["x"]["dm_policy"] == "open"


@pytest.mark.parametrize(
    ("text", "where"),
    [
        (
            "mcp:\n  servers:\n    off: {command: [echo]}\n",
            "line 3: YAML reads off as the boolean false",
        ),
        ("agent:\n  guard: {mode: off}\n", "line 2: YAML reads off as the boolean false"),
        ("agent:\n  id: yes\n", "line 2: YAML reads yes as the boolean true"),
    ],
)
def test_a_yaml_1_1_boolean_where_text_is_expected_says_to_quote_it(
    tmp_path: Path, text: str, where: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path, text), {})
    assert where in str(caught.value) and "in quotes" in str(caught.value)
    quoted = (
        text.replace(" off:", " 'off':").replace(": off}", ": 'off'}").replace(": yes", ": 'yes'")
    )
    load_config(write(tmp_path, quoted), {})  # quoted, the word is read as written


@settings(max_examples=60)
@given(
    st.recursive(
        st.integers() | st.text(max_size=5), lambda c: st.lists(c, max_size=4), max_leaves=30
    )
)
def test_documents_without_aliases_read_as_pyyaml_reads_them(value: object) -> None:
    import yaml

    text = yaml.safe_dump({"k": value})
    assert read_yaml(text).data == yaml.safe_load(text)


def test_the_env_file_the_config_names_is_loaded_by_perch_itself(tmp_path: Path) -> None:
    secrets = tmp_path / "perch.env"
    secrets.write_text("# from perch onboard\nANTHROPIC_API_KEY='sk-ant-from-file'\n")
    secrets.chmod(0o600)
    text = "providers:\n  anthropic: {api_key: '${ANTHROPIC_API_KEY}'}\nsecrets: {env_file: perch.env}\n"
    path = write(tmp_path, text)
    assert load_config(path, {}).providers.anthropic.api_key == "sk-ant-from-file"
    given = {"ANTHROPIC_API_KEY": "sk-ant-from-env"}  # the environment wins over the file
    assert load_config(path, given).providers.anthropic.api_key == "sk-ant-from-env"


def test_a_secrets_file_others_can_read_is_refused_with_one_line(tmp_path: Path) -> None:
    secrets = tmp_path / "perch.env"
    secrets.write_text("ANTHROPIC_API_KEY=sk-ant-from-file\n")
    secrets.chmod(0o640)
    path = write(
        tmp_path,
        "providers:\n  anthropic: {api_key: '${ANTHROPIC_API_KEY}'}\nsecrets: {env_file: perch.env}\n",
    )
    with pytest.raises(ConfigError) as caught:
        load_config(path, {})
    assert "secrets.env_file" in str(caught.value) and f"chmod 600 {secrets}" in str(caught.value)
    assert "sk-ant" not in str(caught.value)
    lenient = load_config(path, {}, lenient=True)  # perch status and friends go on, and say why
    assert any("chmod 600" in note for note in lenient.unresolved)
    proc = run_perch("run", "--config", str(path), cwd=tmp_path, env={"PATH": os.environ["PATH"]})
    assert proc.returncode == EXIT_CONFIG and proc.stderr.count("\n") == 1


def test_the_credentials_dir_serves_cred_references_without_systemd(tmp_path: Path) -> None:
    creds = tmp_path / "credentials"
    creds.mkdir(mode=0o700)
    (creds / "anthropic_api_key").write_text("sk-ant-cred\n")
    text = "providers:\n  anthropic: {api_key: '${cred:anthropic_api_key}'}\nsecrets: {credentials_dir: credentials}\n"
    assert load_config(write(tmp_path, text), {}).providers.anthropic.api_key == "sk-ant-cred"
    creds.chmod(0o755)
    with pytest.raises(ConfigError, match="chmod 700"):
        load_config(write(tmp_path, text), {})


def test_config_path_order_flag_then_env_then_checkout_then_user_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checkout = tmp_path / "clone"
    (checkout / "bot" / "operator").mkdir(parents=True)
    (checkout / "bot" / "operator" / "cli.py").write_text("")
    (checkout / "pyproject.toml").write_text("[project]\nname = 'perch'\n")
    (checkout / "config.yaml").write_text("")
    home = {"HOME": str(tmp_path / "home")}
    monkeypatch.chdir(checkout)
    assert config_path("given.yaml", {**home, "PERCH_CONFIG": "/etc/p.yaml"}) == Path("given.yaml")
    assert config_path(None, {**home, "PERCH_CONFIG": "/etc/p.yaml"}) == Path("/etc/p.yaml")
    assert config_path(None, home) == Path("config.yaml")
    assert edited_config_path(None, home) == Path("config.local.yaml")  # the tracked one stays
    assert edited_config_path("given.yaml", home) == Path("given.yaml")
    (checkout / "config.local.yaml").write_text("")  # your own copy wins over the default
    assert config_path(None, home) == Path("config.local.yaml")
    assert config_path(None, {**home, "PERCH_CONFIG": "/etc/p.yaml"}) == Path("/etc/p.yaml")
    monkeypatch.chdir(tmp_path)  # not a checkout: a config.yaml lying here is not picked up
    (tmp_path / "config.yaml").write_text("")
    assert config_path(None, home) == tmp_path / "home" / ".config" / "perch" / "config.yaml"
    xdg = {**home, "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    assert config_path(None, xdg) == tmp_path / "xdg" / "perch" / "config.yaml"


def test_the_template_ships_inside_the_package() -> None:
    text = template_text()
    assert text.startswith("# Perch configuration") and "secrets:" in text
