"""Every citation in the docs, comments and docstrings names something that exists.

What a reader follows: a design note, a README heading (an `#anchor` link, or a section quoted as
`README, "Name"`), a repository path (`jobs/cli/main.py`), a module or one of its attributes
(`jobs.spark.get_spark`), a make target and a `runoff` command. They are looked for in the
Markdown files (README.md, docs/, benchmarks/) and in the comments and docstrings of the Python
files, in backticks; paths also in the comments of the Makefile, pyproject.toml and the Docker
files. Files are read as text and modules are found without importing them: no JVM, no child
process, well under a second.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from functools import cache
from importlib.machinery import ModuleSpec, PathFinder
from pathlib import Path

from tests.conftest import REPO_ROOT

THIS_FILE = "tests/unit/test_docs.py"  # names what it looks for: not scanned
# Not the repository's own text: dependencies, caches and generated output.
SKIPPED_DIRS = {"node_modules", "__pycache__", "spark-warehouse", "metastore_db"}
SKIPPED_PATHS = {"benchmarks/work", "jvm/jars"}
# Cited paths that `make install`, a run or the reader creates (git ignores them).
GENERATED = ("jvm/jars", "quality/vendor/node_modules", "benchmarks/work", "docker/.env")
# Folders of the runoff home that share their name with a folder of the repository.
HOME_PATHS = ("quality/results", "quality/gx")
CONFIG_FILES = ("pyproject.toml", "Makefile", "docker/Dockerfile", "docker/compose.yaml")
PACKAGES = ("jobs", "core", "quality", "delta_tables", "dags", "benchmarks")

DESIGN_NOTE = re.compile(r"\b(docs/[\w./-]+\.md)\b")
BACKTICKED = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
TRIPLE_QUOTED = re.compile(r'(^[ \t]*)?[rRbBfFuU]{0,2}"""(.*?)"""', re.MULTILINE | re.DOTALL)
COMMENT = re.compile(r"(?:^[ \t]*|  )# ?(.*)$", re.MULTILINE)
FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$")
LINK = re.compile(r"\]\(([^)\s]+)\)")
EXTERNAL = ("http://", "https://", "mailto:")
PATH = re.compile(r"[\w./-]+")
DOTTED = re.compile(rf"(?<![\w./-])((?:{'|'.join(PACKAGES)})(?:\.[A-Za-z_]\w*)+)(?![\w/-])")
RUN_MODULE = re.compile(rf"python -m ((?:{'|'.join(PACKAGES)})(?:\.\w+)*)")
README_SECTION = re.compile(r"README(?:'s)?,?\s*\(?\"([^\"]+)\"")
MAKE = re.compile(r"(?:^|[\s(])make ([a-z][\w-]*)")
RUNOFF = re.compile(r"^(?:\$ )?runoff ([a-z]+)\b(?![.-])")
CONFIG_PATH = re.compile(r"(?<![\w./$<{-])((?:[\w-]+/)+[\w.-]+\.[a-z][a-z0-9]*)\b")

Texts = Mapping[str, str]  # file name -> its whole text
Found = list[tuple[str, str]]  # (file name, what it cites that does not exist)


def repo_files(*suffixes: str) -> list[str]:
    """Every file of the working tree (tracked or new) ending with one of `suffixes`, relative to
    the repository root; hidden folders, dependencies and generated output left out."""
    found = []
    for folder, dirs, files in os.walk(REPO_ROOT):
        rel = Path(folder).relative_to(REPO_ROOT).as_posix()
        prefix = "" if rel == "." else f"{rel}/"
        dirs[:] = [
            d
            for d in dirs
            if not d.startswith(".")
            and d not in SKIPPED_DIRS
            and f"{prefix}{d}" not in SKIPPED_PATHS
        ]
        found += [f"{prefix}{name}" for name in files if name.endswith(suffixes)]
    return sorted(found)


@cache
def read(name: str) -> str:
    return (REPO_ROOT / name).read_text(encoding="utf-8", errors="replace")


@cache
def repo_texts() -> dict[str, str]:
    """The Markdown and Python files of the repository (this one aside), by name."""
    return {name: read(name) for name in repo_files(".md", ".py") if name != THIS_FILE}


def split_markdown(text: str) -> tuple[str, str]:
    """(prose, code) of a Markdown text: lines outside and inside fenced code blocks."""
    prose, code, fenced = [], [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        (code if fenced else prose).append(line)
    return "\n".join(prose), "\n".join(code)


def prose(name: str, text: str) -> str:
    """What a reader reads as explanation: a Markdown file's text outside code blocks, a Python
    file's comments and docstrings (every triple-quoted string that opens a line: parsing every
    file would take seconds)."""
    if name.endswith(".md"):
        return split_markdown(text)[0]
    docstrings = [m.group(2) for m in TRIPLE_QUOTED.finditer(text) if m.group(1) is not None]
    return "\n".join(docstrings + COMMENT.findall(text))


def code_blocks(name: str, text: str) -> str:
    return split_markdown(text)[1] if name.endswith(".md") else ""


def spans(texts: Texts) -> Iterator[tuple[str, str]]:
    """(file, text) of every backticked span of the prose of `texts`."""
    for name, text in texts.items():
        for span in BACKTICKED.findall(prose(name, text)):
            yield name, span.strip()


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lowercase, punctuation but `-` and `_` removed, spaces to
    `-`."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def headings(markdown: str) -> list[str]:
    return [
        m.group(1)
        for line in split_markdown(markdown)[0].splitlines()
        if (m := HEADING.match(line))
    ]


@cache
def anchors(name: str) -> frozenset[str]:
    """The anchors of the headings of the Markdown file `name` (GitHub's: a repeated heading's
    second anchor ends with `-1`, its third with `-2`)."""
    found, seen = set(), dict[str, int]()
    for heading in headings(read(name)):
        base = slug(heading)
        found.add(f"{base}-{seen[base]}" if base in seen else base)
        seen[base] = seen.get(base, 0) + 1
    return frozenset(found)


def dangling_anchors(texts: Texts) -> Found:
    """Every `[text](#anchor)` or `[text](file.md#anchor)` link of the Markdown `texts` whose
    heading does not exist."""
    found = []
    for name, text in texts.items():
        if not name.endswith(".md"):
            continue
        for target in LINK.findall(prose(name, text)):
            if target.startswith(EXTERNAL) or "#" not in target:
                continue
            document, anchor = target.split("#", 1)
            cited = os.path.normpath(Path(name).parent / document) if document else name
            if cited == name:
                names = frozenset(slug(h) for h in headings(text)) | (
                    anchors(name) if (REPO_ROOT / name).is_file() else frozenset()
                )
            else:
                names = anchors(cited) if (REPO_ROOT / cited).is_file() else frozenset()
            if anchor not in names:
                found.append((name, target))
    return found


def path_exists(path: str, cited_in: str) -> bool:
    """Whether `path` exists from the repository root or from the folder of `cited_in`."""
    path = path.rstrip(":")
    if path.startswith(GENERATED + HOME_PATHS):
        return True
    return (REPO_ROOT / path).exists() or (REPO_ROOT / cited_in).parent.joinpath(path).exists()


@cache
def top_folders() -> tuple[str, ...]:
    """`jobs/`, `core/`, ...: a backticked path starting with one is a repository path."""
    return tuple(
        f"{entry.name}/"
        for entry in REPO_ROOT.iterdir()
        if entry.is_dir() and not entry.name.startswith(".") and entry.name not in SKIPPED_DIRS
    )


def dangling_paths(texts: Texts) -> Found:
    """Every backticked repository path (`jobs/cli/main.py`, `docs/`) of `texts` and every
    relative link of their Markdown that does not exist."""
    found = [
        (name, span)
        for name, span in spans(texts)
        if span.startswith(top_folders()) and PATH.fullmatch(span) and not path_exists(span, name)
    ]
    for name, text in texts.items():
        if name.endswith(".md"):
            found += [
                (name, target)
                for target in LINK.findall(prose(name, text))
                if not target.startswith((*EXTERNAL, "#"))
                and not path_exists(target.split("#")[0], name)
            ]
    return found


def dangling_config_paths(texts: Texts) -> Found:
    """Every relative file path (`jvm/pom.xml`) in a comment of the configuration `texts`
    (Makefile, pyproject.toml, Docker files) that does not exist."""
    found = []
    for name, text in texts.items():
        for line in text.splitlines():
            comment = line.partition("#")[2] if "#" in line else ""
            if name.endswith("Makefile") and not line.startswith("#"):
                continue  # a recipe or a rule: `#` is shell or make syntax there
            found += [(name, p) for p in CONFIG_PATH.findall(comment) if not path_exists(p, name)]
    return found


@cache
def find_module(name: str) -> ModuleSpec | None:
    """The spec of the module `name` (`jobs.cli.main`), found without importing its parents."""
    parent, _, last = name.rpartition(".")
    if parent:
        package = find_module(parent)
        if package is None or package.submodule_search_locations is None:
            return None
    folder = REPO_ROOT.joinpath(*parent.split(".")) if parent else REPO_ROOT
    if (folder / last).is_dir() and not (folder / last / "__init__.py").is_file():
        return ModuleSpec(name, None, is_package=True)  # a folder without code (`jobs.datasets`)
    return PathFinder.find_spec(name, [str(folder)])


def defines(source: str, name: str) -> bool:
    """Whether a module's text defines or imports `name`: a function, class, assignment or
    annotated name at any depth (a method or a field too)."""
    return bool(
        re.search(
            rf"^\s*(?:async\s+def|def|class)\s+{name}\b|^\s*(?:self\.)?{name}\s*[:=]"
            rf"|\bimport\b[^\n]*\b{name}\b|^\s+{name},$",
            source,
            re.MULTILINE,
        )
    )


def resolves(dotted: str) -> bool:
    """Whether `jobs.a.b` is a module or `jobs.a.b.name[.member]` an attribute of one: the
    longest prefix that is a module, then each attribute by a search of that module's text."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        spec = find_module(".".join(parts[:cut]))
        if spec is not None:
            break
    else:
        return False
    if cut == len(parts):
        return True
    if spec.origin is None or not spec.origin.endswith(".py"):
        return False
    source = Path(spec.origin).read_text(encoding="utf-8")
    return all(defines(source, attribute) for attribute in parts[cut:])


def dangling_modules(texts: Texts) -> Found:
    """Every backticked `jobs.a.b`, `core.x.name`, ... of `texts`, and every `python -m` module
    of their Markdown code blocks, that is neither a module nor a module's attribute."""
    cited = [(name, dotted) for name, span in spans(texts) for dotted in DOTTED.findall(span)]
    cited += [
        (name, module)
        for name, text in texts.items()
        for module in RUN_MODULE.findall(code_blocks(name, text))
    ]
    return [(name, dotted) for name, dotted in cited if not resolves(dotted)]


def readme_sections() -> set[str]:
    """What `README, "..."` may name: a heading (without backticks; also the part before its
    colon) or the label that opens a paragraph (`Examples:`), lowercased."""
    names = set()
    for heading in headings(read("README.md")):
        text = heading.replace("`", "")
        names |= {text, text.split(":")[0]}
    names |= {
        line[:-1]
        for line in split_markdown(read("README.md"))[0].splitlines()
        if line.endswith(":")
    }
    return {name.strip().lower() for name in names}


def dangling_readme_sections(texts: Texts) -> Found:
    """Every `README, "Section"` (or `README "Section"`, `README's "Section"`) of the prose of
    `texts` whose section does not exist."""
    names = readme_sections()
    return [
        (name, section)
        for name, text in texts.items()
        for section in README_SECTION.findall(" ".join(prose(name, text).split()))
        if section.strip().lower() not in names
    ]


def make_targets() -> set[str]:
    return set(re.findall(r"^([\w-]+)\s*:(?!=)", read("Makefile"), re.MULTILINE))


def runoff_commands() -> set[str]:
    """The commands of `jobs.cli.main.COMMANDS`, read from its text."""
    return set(re.findall(r'^    "(\w+)": \(', read("jobs/cli/main.py"), re.MULTILINE))


def dangling_commands(texts: Texts) -> Found:
    """Every `make <target>` and `runoff <command>` of `texts` (backticked, or a line of a
    Markdown code block) whose target or command does not exist."""
    targets, commands = make_targets(), runoff_commands()
    cited = [*spans(texts)]
    cited += [
        (name, line.strip())
        for name, text in texts.items()
        for line in code_blocks(name, text).splitlines()
    ]
    found = []
    for name, text in cited:
        found += [(name, f"make {t}") for t in MAKE.findall(text) if t not in targets]
        found += [(name, f"runoff {c}") for c in RUNOFF.findall(text) if c not in commands]
    return found


def test_every_cited_design_note_exists() -> None:
    cited = {
        (name, note)
        for name in repo_files(".py", ".md", ".yaml", ".toml")
        for note in DESIGN_NOTE.findall(read(name))
    }
    assert ("jobs/cli/server.py", "docs/server.md") in cited  # the check sees citations
    missing = sorted((name, note) for name, note in cited if not (REPO_ROOT / note).is_file())
    assert missing == []


def test_no_file_cites_a_design_document_outside_the_repository() -> None:
    for name in repo_files(".py", ".md", ".yaml", ".toml"):
        if name == THIS_FILE:  # names what it looks for
            continue
        text = read(name)
        assert "DESIGN.md" not in text and "../shared" not in text, name


def test_every_anchor_link_names_a_heading() -> None:
    planted = "# A `b`: c\n\n[ok](#a-b-c) [gone](#commands) [ok](README.md#quick-start)\n"
    assert dangling_anchors({"x.md": planted}) == [("x.md", "#commands")]
    assert "one-warm-spark-driver-runoff-serve" in anchors("README.md")
    assert sorted(set(dangling_anchors(repo_texts()))) == []


def test_every_cited_repository_path_exists() -> None:
    planted = '"""`jobs/cli/main.py`, `jobs/main.py`, `docs/`, `<home>/x/y.py`."""\n'
    assert dangling_paths({"x.py": planted}) == [("x.py", "jobs/main.py")]
    assert dangling_config_paths({"pyproject.toml": 'a = "1"  # as in jars/pom.xml'}) == [
        ("pyproject.toml", "jars/pom.xml")
    ]
    configs = {name: read(name) for name in CONFIG_FILES}
    assert sorted(set(dangling_paths(repo_texts()) + dangling_config_paths(configs))) == []


def test_every_cited_module_and_attribute_exists() -> None:
    planted = (
        "# `jobs.cli.main`, `jobs.spark.get_spark(...)`, `dags.hooks.RunoffCliHook.run_cli`,\n"
        "# `jobs.streaming.interrupts.deliver`, `jobs.bronze.job.NO_SUCH_NAME`\n"
    )
    assert dangling_modules({"x.py": planted}) == [
        ("x.py", "jobs.streaming.interrupts.deliver"),
        ("x.py", "jobs.bronze.job.NO_SUCH_NAME"),
    ]
    assert dangling_modules({"x.md": "```\npython -m benchmarks.bench_nothing\n```\n"}) == [
        ("x.md", "benchmarks.bench_nothing")
    ]
    assert sorted(set(dangling_modules(repo_texts()))) == []


def test_every_cited_readme_section_exists() -> None:
    planted = '"""See README, "Scaling out", and README, "Home\n    directory"."""\n'
    assert dangling_readme_sections({"x.py": planted}) == [("x.py", "Home directory")]
    assert sorted(set(dangling_readme_sections(repo_texts()))) == []


def test_every_cited_make_target_and_command_exists() -> None:
    planted = "`make demo`, `make nothing`, `runoff status`\n\n```\nrunoff nothing x\n```\n"
    assert dangling_commands({"x.md": planted}) == [
        ("x.md", "make nothing"),
        ("x.md", "runoff nothing"),
    ]
    assert sorted(set(dangling_commands(repo_texts()))) == []
