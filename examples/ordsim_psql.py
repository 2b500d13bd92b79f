"""A PostgreSQL session for the example consumers with Python's standard library only: a `psql`
process (Debian's postgresql-client) fed SQL on stdin, its answers read back from stdout. It
connects to ORDSIM_DATABASE_URL, which `sim live --consumer` sets (with --writes, --schema or a
db_outage in the scenario). Any error ends psql (ON_ERROR_STOP): `query` raises OSError, and the
next query starts a new session, as a pooled connection would after a database outage."""

import os
import subprocess

END = "__ordsim_end__"


class Psql:
    def __init__(self):
        self.proc = None

    def start(self):
        self.proc = subprocess.Popen(
            ["psql", os.environ["ORDSIM_DATABASE_URL"], "-X", "-q", "-A", "-t",
             "-v", "ON_ERROR_STOP=1"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)

    def query(self, sql):
        """Runs `sql` (one or more statements); the rows it printed, one string each."""
        if self.proc is None or self.proc.poll() is not None:
            self.start()
        try:
            self.proc.stdin.write(sql + "\n\\echo " + END + "\n")
            self.proc.stdin.flush()
            rows = []
            for line in self.proc.stdout:
                line = line.rstrip("\n")
                if line == END:
                    return rows
                if line:
                    rows.append(line)
        except (BrokenPipeError, ValueError):
            pass
        self.proc.kill()
        self.proc.wait()
        self.proc = None
        raise OSError("the database session ended")
