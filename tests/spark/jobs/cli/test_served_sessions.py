"""Commands `runoff serve` runs side by side: each in a Spark session of its own.

Two threads stand for two served commands (tests/e2e/test_server.py drives the server itself):
each bound to a caller with its own `newSession()` of the test run's driver, as
`jobs.cli.server.Server.execute` binds them. `get_spark()` gives each command its session, and a
setting one command makes (as the silver MERGE sets its app-transaction settings) is invisible
to the other and to the driver's own session.
"""

from __future__ import annotations

import io
import threading
from pathlib import Path
from typing import Any

from core import caller
from core.caller import Caller
from core.console import new_console
from delta_tables.writes import TXN_APP_ID
from jobs.spark import get_spark


def test_each_served_command_has_its_own_session_and_settings(spark: Any, tmp_path: Path) -> None:
    seen: dict[str, tuple[Any, str | None]] = {}
    both_set = threading.Barrier(2)

    def command(name: str) -> None:
        out = io.StringIO()
        served = Caller(
            env={},
            cwd=tmp_path,
            stdout=out,
            stderr=out,
            console=new_console(out),
            session=spark.newSession(),
        )
        with caller.bound(served):
            session = get_spark()
            session.conf.set(TXN_APP_ID, f"app-of-{name}")
            both_set.wait(timeout=30)  # both commands have set theirs
            seen[name] = (session, session.conf.get(TXN_APP_ID))
            assert session is served.session

    threads = [threading.Thread(target=command, args=(name,)) for name in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert {name: value for name, (_, value) in seen.items()} == {"a": "app-of-a", "b": "app-of-b"}
    assert seen["a"][0] is not seen["b"][0]
    assert spark.conf.get(TXN_APP_ID, None) is None
