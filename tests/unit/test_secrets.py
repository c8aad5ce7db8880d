"""No password, secret or key is committed: every tracked file is scanned.

Flagged: an assignment (`KEY = "..."`, `KEY: ...`, `KEY=...`, `"KEY": "..."`) whose key names a
password, secret, token or key (`..._PASSWORD`, `jwt_secret`, `fernet_key`, `api_key`, ...) and
whose value is a literal; a literal default for such a variable (in `${...:-default}` or
`os.environ.get(..., default)`); a password in a URL (between `user:` and `@host`); private key
blocks and well-known token formats. Allowed: references to the environment
(`${VAR}`, `${VAR:?message}`, `$VAR`), empty values, placeholders (`...`, `<...>`, `{...}`), and
in Python any value that is not a string literal (a variable, a call). Also: no file turns
Airflow's authentication off (`SIMPLE_AUTH_MANAGER_ALL_ADMINS` true) but for `make airflow`'s
local mode (`dags/standalone.py`).
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

SECRET_KEY = (
    r"[\w.-]*?(?:password|passwd|secret|fernet[_-]?key|api[_-]?key|access[_-]?key"
    r"|private[_-]?key|auth[_-]?token|access[_-]?token)"
)
# The key ends at the secret word: `PASSWORD_FILE = "passwords.json"` names a file, not a secret.
ASSIGNMENT = re.compile(
    rf"(?i)\b(?P<key>{SECRET_KEY})\b[\"']?\s*(?::=|:|=)\s*(?P<value>(?P<q>[\"']).*?(?P=q)|[^\s,;)\]}}]*)"
)
ENV_REFERENCE = re.compile(r"\$\{[^}]*\}")
ENV_DEFAULT = re.compile(rf"(?i)\$\{{(?P<key>{SECRET_KEY})\}}?:?-(?P<value>[^}}]+)\}}")
PY_DEFAULT = re.compile(
    rf"(?i)(?:getenv|environ\.get|env\.get)\(\s*[\"'](?P<key>{SECRET_KEY})[\"']\s*,\s*"
    r"[\"'](?P<value>[^\"']+)[\"']"
)
URL_CREDENTIALS = re.compile(r"://[^/\s:@'\"]+:(?P<value>[^@\s/'\"]+)@")
TOKEN_FORMATS = re.compile(
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----|\bAKIA[0-9A-Z]{16}\b|\bgh[pousr]_[A-Za-z0-9]{36}\b"
    r"|\bxox[abprs]-[A-Za-z0-9-]{10,}"
)
PLACEHOLDERS = ("$", "{", "<", "...", "*", "&")
ALL_ADMINS = re.compile(r"(?i)simple_auth_manager_all_admins[\"']?\s*[:=]\s*[\"']?true")
LOCAL_MODE = "dags/standalone.py"


def is_literal(value: str, suffix: str) -> bool:
    """Whether an assignment's value is a literal secret (not a reference or a placeholder)."""
    value = value.strip()
    if value[:1] in ("'", '"'):
        inner = value[1:-1]
        return bool(inner) and not inner.startswith(PLACEHOLDERS)
    if suffix == ".py":
        return False  # an expression: a name, a call, an f-string
    return bool(value) and not value.startswith(PLACEHOLDERS) and value not in ("null", "~")


def secret_literals(line: str, suffix: str) -> list[str]:
    """What in `line` (of a file ending in `suffix`) looks like a committed secret."""
    defaults = [*ENV_DEFAULT.finditer(line), *PY_DEFAULT.finditer(line)]
    found = [m.group(0) for m in defaults if not m.group("value").startswith(PLACEHOLDERS)]
    found += [m.group(0) for m in TOKEN_FORMATS.finditer(line)]
    # Environment references resolve at run time: what they hold is not in the file.
    bare = ENV_REFERENCE.sub("", line)
    urls = URL_CREDENTIALS.finditer(bare)
    found += [m.group(0) for m in urls if not m.group("value").startswith(PLACEHOLDERS)]
    found += [m.group(0) for m in ASSIGNMENT.finditer(bare) if is_literal(m.group("value"), suffix)]
    return found


def tracked_files() -> Iterator[tuple[str, str]]:
    """(path, text) of every tracked text file, as it is in the working tree."""
    listing = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    )
    for name in filter(None, listing.stdout.split("\0")):
        path = REPO_ROOT / name
        if not path.is_file():
            continue  # deleted in the working tree
        try:
            yield name, path.read_text()
        except UnicodeDecodeError:
            continue  # binary


# Each line here would be a committed secret (built from parts so that this file holds none).
PW = "pass" + "word"
SECRET_LINES = [
    ("compose.yaml", f"      POSTGRES_{PW.upper()}: airflow"),
    ("compose.yaml", "    JWT_SECRET: ${RUNOFF_JWT_" + "SECRET:-runoff-local-only}"),
    ("compose.yaml", "    URL: postgresql+psycopg://airflow:" + "airflow@postgres:5432/airflow"),
    ("settings.py", f'db_{PW} = "hunter2"'),
    ("settings.py", 'config = {"jwt_secret' + '": "abc"}'),
    ("settings.py", f'token = os.environ.get("API_{PW.upper()}", "hunter2")'),
    (".env", "AIRFLOW__CORE__FERNET_KEY=c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0cw="),
    ("key.pem", "-----BEGIN RSA PRIVATE " + "KEY-----"),
]
SAFE_LINES = [
    ("compose.yaml", f'      POSTGRES_{PW.upper()}: "${{RUNOFF_POSTGRES_{PW.upper()}:?set it}}"'),
    ("compose.yaml", "    URL: postgresql+psycopg://airflow:${RUNOFF_PG:?set it}@postgres/airflow"),
    ("settings.py", f'{PW.upper()}_FILE = "simple_auth_manager_{PW}s.json.generated"'),
    ("settings.py", f"def login(url: str, {PW}: str) -> str:"),
    ("settings.py", f'body = {{"username": "admin", "{PW}": {PW}}}'),
    ("settings.py", 'secret = os.environ["RUNOFF_JWT_SECRET"]'),
    ("compose.yaml", "      - ${RUNOFF_BIND:-127.0.0.1}:8080:8080"),
    ("README.md", f"export RUNOFF_POSTGRES_{PW.upper()}=<letters and digits>"),
    ("test.py", 'url = f"postgresql://airflow:{secret}@postgres/airflow"'),
]


@pytest.mark.parametrize(("name", "line"), SECRET_LINES)
def test_the_scan_finds_secret_literals(name: str, line: str) -> None:
    assert secret_literals(line, Path(name).suffix), line


@pytest.mark.parametrize(("name", "line"), SAFE_LINES)
def test_the_scan_allows_references_to_the_environment(name: str, line: str) -> None:
    assert secret_literals(line, Path(name).suffix) == [], line
