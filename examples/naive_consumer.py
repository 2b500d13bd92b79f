#!/usr/bin/env python3
"""A naive consumer for `sim live FILE --consumer 'python3 examples/naive_consumer.py'`: it writes
every message it receives (the key's state = the message's seq) to a SQLite table shared by the
copies, whatever was written before. A message redelivered after a crash, or held by a paused
copy while another wrote newer ones, overwrites newer state: ordering violations, stale writes."""

import os
import sqlite3
import time

from ordsim_stomp import consume, report

db = sqlite3.connect(os.path.join(os.environ["ORDSIM_STATE_DIR"], "state.db"), timeout=30,
                     isolation_level=None)
db.execute("PRAGMA journal_mode=WAL")
db.execute("CREATE TABLE IF NOT EXISTS state (key TEXT PRIMARY KEY, seq INTEGER)")


def handle(key, seq):
    time.sleep(0.002)  # the work
    db.execute("INSERT OR REPLACE INTO state (key, seq) VALUES (?, ?)", (key, seq))
    report("apply", key, seq)


consume(handle)
