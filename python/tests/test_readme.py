"""Every python block of README.md and docs/*.md runs as written (in a scratch folder, one namespace per
page, blocks in order), so a documented snippet cannot use a name it never defines; the sh blocks are
tests/docs/readme_commands.py's."""

import pathlib

import pytest

from conftest import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def python_blocks(text):
    blocks, body, inside = [], [], False
    for line in text.splitlines():
        if line.startswith("```"):
            if inside:
                blocks.append("\n".join(body))
            inside, body = not inside and line.strip() == "```python", []
        elif inside:
            body.append(line)
    return blocks


@pytest.mark.parametrize("page", [p for p in PAGES if python_blocks(p.read_text())], ids=lambda p: p.name)
def test_python_blocks_run(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace = {}
    for block in python_blocks(page.read_text()):
        exec(compile(block, str(page), "exec"), namespace)


def test_the_readme_has_a_python_block():
    assert python_blocks((ROOT / "README.md").read_text())
