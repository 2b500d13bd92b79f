#!/usr/bin/env python3
"""A guarded consumer for `sim live FILE --consumer 'python3 examples/guarded_consumer.py'`: the
same write as naive_consumer.py, guarded by a version column. In one transaction (SQLite's write
lock, shared by the copies) it reads the key's version and writes only a newer message; an older
or repeated one is left unwritten and reported as `skip` (a stale rejection). Nothing older than
what was written is ever applied."""

import os
import sqlite3
import time

from ordsim_stomp import consume, report

db = sqlite3.connect(os.path.join(os.environ["ORDSIM_STATE_DIR"], "state.db"), timeout=30,
                     isolation_level=None)
db.execute("PRAGMA journal_mode=WAL")
db.execute("CREATE TABLE IF NOT EXISTS state (key TEXT PRIMARY KEY, seq INTEGER)")


def handle(key, seq):
    db.execute("BEGIN IMMEDIATE")
    time.sleep(0.002)  # the work, under the lock: the copies' writes (and reports) are in order
    row = db.execute("SELECT seq FROM state WHERE key = ?", (key,)).fetchone()
    newer = row is None or seq > row[0]
    if newer:
        db.execute("INSERT OR REPLACE INTO state (key, seq) VALUES (?, ?)", (key, seq))
    db.execute("COMMIT")
    report("apply" if newer else "skip", key, seq)


consume(handle)
