#!/usr/bin/env python3
"""A consumer that writes PostgreSQL, for `sim live FILE --consumer 'python3
examples/pg_consumer.py' --writes 'rows(k,state)'`: ordsim reads what it applied from the table
it writes (a trigger logs each write), so it prints no "apply" line. Each message is one
transaction on the `rows` table: naive (default), an upsert of the key's state whatever was
written before; with --guarded, the same upsert only when the stored state is older, a stale
message left unwritten and reported as "skip" (else it would count as lost). A database error
(a db_outage) leaves the message unacknowledged: the broker gives it back after a reconnect."""

import sys
import time

from ordsim_psql import Psql
from ordsim_stomp import consume, report

GUARDED = "--guarded" in sys.argv[1:]
db = Psql()


def handle(key, seq):
    k = int(key.lstrip("k"))
    time.sleep(0.002)  # the work
    guard = "WHERE rows.state < EXCLUDED.state" if GUARDED else ""
    written = db.query(
        "INSERT INTO rows (k, state, version) VALUES (%d, %d, 1) ON CONFLICT (k) DO UPDATE "
        "SET state = EXCLUDED.state, version = rows.version + 1 %s RETURNING k;" % (k, seq, guard))
    if not written:
        report("skip", key, seq)


consume(handle)
