"""Runs every command of the sh blocks of README.md and docs/*.md, file by file and in order, each file's
in a scratch folder that sees the checkout's tests/ and the build's binary as the pages name them
(tests/..., build/bin/cpdit), so the documented commands cannot rot:
- a command exits 0;
- one that names a file to download (a path under /path/to/) runs with --dry-run, which checks
  everything but the files without reading weights, and exits 2 with one line naming every file not
  found: its flags parsed and checked, and only files were missing (the download among them, and what a
  command on it would have written);
- the two set-up commands (scripts/run.sh, scripts/test.sh) are left to the clean-clone checks (this test
  is part of the second), a benchmark runs as `--help` (they take minutes), python lines (the python
  blocks run in python/tests/test_readme.py, where the package is installed) and an mpirun across other
  hosts (--host) are not run, nor a command that caps the kernels at an instruction set (CPDIT_KERNEL_ISA=)
  this CPU lacks (cpdit refuses it, saying so); each is counted and printed.
Usage: readme_commands.py PAGE.md [PAGE.md ...] BUILD_DIR"""

import os
import pathlib
import shlex
import subprocess
import sys
import tempfile
import time


def logical_lines(block):
    """The block's commands: backslash continuations joined, comments and blank lines dropped."""
    lines, current = [], ""
    for raw in block.splitlines():
        current += raw.rstrip()
        if current.endswith("\\"):
            current = current[:-1] + " "
            continue
        if current.strip() and not current.lstrip().startswith("#"):
            lines.append(current.strip())
        current = ""
    return lines


def sh_blocks(text):
    blocks, inside, body = [], False, []
    for line in text.splitlines():
        if line.startswith("```"):
            if inside:
                blocks.append("\n".join(body))
            inside, body = (not inside and line.strip() == "```sh"), []
            continue
        if inside:
            body.append(line)
    return blocks


def main(pages, build):
    assert sh_blocks(pathlib.Path(pages[0]).read_text()), f"{pages[0]} has no sh commands"
    counts = [run_page(page, build) for page in pages]
    passed, failed = sum(c[0] for c in counts), sum(c[1] for c in counts)
    print(f"{len(pages)} pages: {passed} passed, {failed} failed")
    return 1 if failed else 0


def checkout_root(page):
    """The repository root above a page (README.md is in it, docs/*.md one folder down)."""
    folder = pathlib.Path(page).resolve().parent
    return folder if (folder / "tests").is_dir() else folder.parent


def run_page(page, build):
    """Runs one page's commands; returns (passed, failed)."""
    root = checkout_root(page)
    print(f"== {page}", flush=True)
    commands = [c for block in sh_blocks(pathlib.Path(page).read_text()) for c in logical_lines(block)]
    if not commands:  # a page of prose (docs/architecture.md)
        print("no sh commands")
        return 0, 0
    passed = failed = 0
    left = {"set-up command": 0, "benchmark (--help only)": 0, "python": 0, "mpirun on other hosts": 0,
            "instruction set this CPU lacks": 0}
    with tempfile.TemporaryDirectory(prefix="cpdit_readme_") as scratch:
        os.symlink(root / "tests", os.path.join(scratch, "tests"))
        os.symlink(os.path.abspath(build), os.path.join(scratch, "build"))
        env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        for command in commands:
            words = shlex.split(command, comments=True)
            if not words:
                continue
            if words[0] == "bash" and any(w.startswith("scripts/") for w in words):
                left["set-up command"] += 1
                continue
            if any(w.endswith("python") or w.startswith("python") for w in words[:1]):
                left["python"] += 1
                continue
            if words[0] == "mpirun" and "--host" in words:
                left["mpirun on other hosts"] += 1
                continue
            if words[0] == "export":
                for assignment in words[1:]:
                    name, _, value = assignment.partition("=")
                    env[name] = value
                continue
            shell = command  # bash reads its quotes, redirections and comments
            if "bench" in words and words[words.index("bench") - 1].endswith("cpdit"):
                shell = " ".join(shlex.quote(w) for w in words) + " --help"
                left["benchmark (--help only)"] += 1
            download = [w for w in words if "/path/to/" in w]
            if download:
                shell += " --dry-run"
            start = time.monotonic()
            run = subprocess.run(["bash", "-c", shell], cwd=scratch, env=env, capture_output=True, text=True,
                                 timeout=600)
            took = time.monotonic() - start
            if (words[0].startswith("CPDIT_KERNEL_ISA=") and run.returncode == 2
                    and "needs an instruction set this CPU lacks" in run.stderr):
                left["instruction set this CPU lacks"] += 1
                print(f"not run here  {command[:150]}", flush=True)
                continue
            ok = (run.returncode == 2 and run.stderr.count("\n") == 1 and "not found" in run.stderr
                  and all(w in run.stderr for w in download)) if download else run.returncode == 0
            passed += ok
            failed += not ok
            print(f"{'ok  ' if ok else 'FAIL'} {took:6.1f} s  rc {run.returncode}  {command[:150]}", flush=True)
            if not ok:
                print(run.stderr[-2000:], flush=True)
    print("not run whole: " + ", ".join(f"{n} {what}" for what, n in left.items() if n))
    print(f"{passed} passed, {failed} failed")
    return passed, failed


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:-1], sys.argv[-1]))
