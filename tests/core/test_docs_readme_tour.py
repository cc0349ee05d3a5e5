"""README.md works read top to bottom (issue 40): every command of its ```bash blocks runs as written, in
the README's order, in a copy of the checkout's files (what a fresh clone holds), starting with `make demo`.

The commands are parsed out of README.md, so this test follows the README as it changes. Each one runs in
its own `bash -c` from the copy's root, after the README's earlier `source`/`export`/`unset` lines (the
shell state a reader carries from one block to the next), with no DAGSTER_*/SLM4IE_* variable and without
the venv on PATH, as in a new terminal. It must exit 0 without a traceback. NOT_RUN names the few commands
a test cannot run as written and why; each of them must still be in the README.
"""

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from support.paths import REPO, VENV_BIN

pytestmark = pytest.mark.slow

# by how the command starts: why it is not run here
NOT_RUN = {
    "make test": "the whole suite, which holds this test",
    "dg dev": "the UI server runs until Ctrl-C; tests/dagster_layer/test_dg_cli.py starts it and loads its page",
    "jid=$(sbatch": "needs a Slurm cluster; tests/slurm/ submits these jobs to the one `make slurm-up` starts",
    "sbatch": "needs a Slurm cluster (as above)",
}
SHELL_STATE = ("source ", ". ", "export ", "unset ")  # what a reader's later commands inherit
FENCE = "```bash"


@dataclass(frozen=True)
class Command:
    line: int  # where it starts in README.md, 1-based
    text: str


def readme_commands(markdown: str) -> list[Command]:
    """The commands of every ```bash block in order; a trailing backslash continues a command."""
    commands: list[Command] = []
    inside, pending, start = False, "", 0
    for number, raw in enumerate(markdown.splitlines(), 1):
        line = raw.strip()
        if not inside:
            inside = line == FENCE
            continue
        if line == "```":
            assert not pending, f"README.md:{start}: a command ends its block with a backslash"
            inside = False
        elif line and not line.startswith("#"):
            start = start if pending else number
            pending += line
            if pending.endswith("\\"):
                pending = pending[:-1] + " "
            else:
                commands.append(Command(start, pending))
                pending = ""
    assert not inside, "README.md: a ```bash block is not closed"
    return commands


def not_run(command: Command) -> str | None:
    return next((prefix for prefix in NOT_RUN if command.text.startswith(prefix)), None)


def fresh_clone(dest: Path) -> Path:
    """The files a clone of this checkout holds (tracked, and new files not ignored), with their mtimes,
    and the checkout's .venv and .uv linked in, so `make demo` finds the venv current and installs nothing."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for rel in filter(None, listed):
        source = REPO / rel
        if source.is_file() and not source.is_symlink():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / rel)
    for tool in (".venv", ".uv"):
        (dest / tool).symlink_to(REPO / tool, target_is_directory=True)
    current = subprocess.run(["make", "-q", ".venv/.installed"], cwd=dest, capture_output=True)
    if current.returncode != 0:
        pytest.fail("the venv is older than pyproject.toml or uv.lock: run `make venv` first (this test never "
                    "installs into the checkout's venv)")
    return dest


def new_terminal() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("DAGSTER_", "SLM4IE_")) and k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if p and Path(p).resolve() != VENV_BIN.resolve())
    return env


def test_the_parser_reads_blocks_in_order_joins_continuations_and_leaves_other_fences_alone():
    markdown = ("text\n```bash\nmake demo   # a comment\n\n# only a comment\n```\n```yaml\nkey: v\n```\n"
                "1. step\n\n   ```bash\n   export A=1\n   dg launch --assets x \\\n     --config-json '{}'\n   ```\n"
                "```\n$ slm4ie stats\n```\n")
    assert readme_commands(markdown) == [Command(3, "make demo   # a comment"), Command(13, "export A=1"),
                                         Command(14, "dg launch --assets x  --config-json '{}'")]
    with pytest.raises(AssertionError, match="not closed"):
        readme_commands("```bash\nls\n")


def test_every_command_of_the_readme_runs_in_order_from_a_fresh_clone(tmp_path):
    commands = readme_commands((REPO / "README.md").read_text(encoding="utf-8"))
    assert commands[0].text.startswith("make demo"), "the README starts somewhere else than `make demo`"
    clone = fresh_clone(tmp_path / "clone")
    env, state, skipped, ran = new_terminal(), [], set(), []
    for command in commands:
        prefix = not_run(command)
        if prefix is not None:
            skipped.add(prefix)
            continue
        script = "\n".join(["set -eo pipefail", *state, command.text])
        res = subprocess.run(["nice", "bash", "-c", script], cwd=clone, env=env, capture_output=True, text=True,
                             timeout=600)
        where = f"README.md:{command.line}: `{command.text}` exited {res.returncode}"
        assert res.returncode == 0, f"{where}\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
        assert "Traceback (most recent call last)" not in res.stdout + res.stderr, f"{where}\n{res.stderr[-3000:]}"
        if command.text.startswith(SHELL_STATE):
            state.append(command.text)
        ran.append(command.text)
    assert skipped == set(NOT_RUN), f"NOT_RUN names commands the README no longer has: {set(NOT_RUN) - skipped}"
    assert any(c.startswith("dg launch") for c in ran) and any(c.startswith("slm4ie inspect") for c in ran)
