"""quality.gate's records: per-batch checks -> ledger totals, report lines and history rows."""

from __future__ import annotations

from datetime import UTC, datetime

from quality.gate import BatchCheck, batch_rows, problems, rule_checks, summarize

AT = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


def check(batch: int, expectation: str, severity: str, evaluated: int, failed: int) -> BatchCheck:
    rule = severity == "quarantine"
    return BatchCheck(
        table="bronze_orders",
        batch_id=batch,
        expectation=expectation,
        severity=severity,
        evaluated=evaluated,
        failed=failed,
        quarantined=failed if severity == "quarantine" else 0,
        observed=f"{failed} of {evaluated} unexpected",
        success=failed == 0,
        kind="" if rule else "expect_column_values_to_be_between",
        column=None if rule else expectation,
    )


def test_rule_checks_count_quarantined_rows_per_rule() -> None:
    checks = rule_checks("bronze_orders", 4, 30, {"known_store": 2, "wrong type": 0})
    assert checks == [
        BatchCheck(
            "bronze_orders", 4, "known_store", "quarantine", 30, 2, 2, "2 of 30 quarantined", False
        ),
        BatchCheck(
            "bronze_orders", 4, "wrong type", "quarantine", 30, 0, 0, "0 of 30 quarantined", True
        ),
    ]
    assert not any(c.critical_failure for c in checks)


def test_summarize_adds_up_every_batch_per_table_and_expectation() -> None:
    checks = [
        check(0, "amount", "warning", 10, 1),
        check(1, "amount", "warning", 5, 0),
        check(1, "known_store", "quarantine", 6, 2),
        check(2, "amount", "warning", 7, 3),
    ]
    assert summarize(checks) == {
        "bronze_orders: amount": {
            "severity": "warning",
            "kind": "expect_column_values_to_be_between",
            "column": "amount",
            "batches": 3,
            "evaluated": 22,
            "failed": 4,
            "quarantined": 0,
        },
        "bronze_orders: known_store": {
            "severity": "quarantine",
            "kind": "",
            "column": None,
            "batches": 1,
            "evaluated": 6,
            "failed": 2,
            "quarantined": 2,
        },
    }
    assert problems(checks) == [
        "bronze_orders: amount: 4 of 22 rows (warning) over 3 batches",
        "bronze_orders: known_store: 2 of 6 rows (quarantined) over 1 batches",
    ]
    assert problems([check(0, "amount", "critical", 10, 0)]) == []


def test_batch_rows_are_history_rows_per_batch_that_never_mark_a_validation() -> None:
    checks = [check(3, "amount", "critical", 10, 1), check(4, "amount", "critical", 8, 0)]
    rows = batch_rows(
        "run-1",
        "orders",
        "bronze",
        checks,
        {"bronze_orders": 5},
        {"bronze_orders": 5},
        {"bronze_orders": "table-id"},
        AT,
    )
    assert [
        (r.suite, r.batch_id, r.evaluated, r.failed, r.success, r.table_passed) for r in rows
    ] == [
        ("bronze_orders_batch 3", 3, 10, 1, False, False),
        ("bronze_orders_batch 4", 4, 8, 0, True, True),
    ]
    assert {(r.from_version, r.to_version, r.table_id, r.layer, r.rows) for r in rows} == {
        (5, 5, "table-id", "bronze", 10),
        (5, 5, "table-id", "bronze", 8),
    }
