"""A minimal STOMP 1.2 consumer for `sim live FILE --consumer CMD` (docs/live.md, "Your own
consumer"): Python 3's standard library only. It reads the connection details ordsim puts in the
environment, subscribes with client-individual acks, and calls `handle(key, seq)` for each
message; `handle` prints the protocol's JSON lines. Used by naive_consumer.py and
guarded_consumer.py."""

import json
import os
import socket
import sys
import time

# Acks are deferred, as many consumers batch them: up to this many, or until the queue is quiet.
ACK_EVERY = 10
QUIET = 0.2


def report(event, key, seq):
    """One protocol line on stdout: {"apply": {...}}, {"skip": {...}} or {"ack": {...}}."""
    print(json.dumps({event: {"key": key, "seq": seq}}), flush=True)


class Conn:
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=2)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""
        self.send("CONNECT", {"accept-version": "1.2", "host": "localhost", "heart-beat": "0,0"})
        if self.frame(5)[0] != "CONNECTED":
            raise OSError("no CONNECTED")

    def send(self, command, headers):
        lines = [command] + ["%s:%s" % kv for kv in headers.items()]
        self.sock.sendall(("\n".join(lines) + "\n\n\0").encode())

    def frame(self, timeout):
        """The next frame (command, headers, body), or None after `timeout` seconds."""
        self.sock.settimeout(timeout)
        while True:
            self.buf = self.buf.lstrip(b"\r\n")  # heart-beats
            head_end = self.buf.find(b"\n\n")
            if head_end >= 0:
                head = self.buf[:head_end].decode().split("\n")
                headers = {}
                for h in head[1:]:
                    k, _, v = h.partition(":")
                    headers.setdefault(k, v)
                start = head_end + 2
                if "content-length" in headers:
                    end = start + int(headers["content-length"])
                    if len(self.buf) > end:
                        body, self.buf = self.buf[start:end], self.buf[end + 1:]
                        return head[0], headers, body
                else:
                    end = self.buf.find(b"\0", start)
                    if end >= 0:
                        body, self.buf = self.buf[start:end], self.buf[end + 1:]
                        return head[0], headers, body
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                return None
            if not data:
                raise OSError("connection closed")
            self.buf += data


def consume(handle):
    """Consumes ORDSIM_QUEUE for ever, reconnecting (in ORDSIM_BROKER_PORTS order) when the
    broker goes away; `handle(key, seq)` applies one message."""
    ports = [int(p) for p in os.environ["ORDSIM_BROKER_PORTS"].split(",")]
    extra = {}
    for h in filter(None, os.environ.get("ORDSIM_SUBSCRIBE_HEADERS", "").split(",")):
        k, _, v = h.partition(":")
        extra[k] = v
    ready = False
    while True:
        conn = None
        for port in ports:
            try:
                conn = Conn(port)
                break
            except OSError:
                conn = None
        if conn is None:
            time.sleep(0.1)
            continue
        try:
            sub = {"id": "0", "destination": os.environ["ORDSIM_QUEUE"], "ack": "client-individual",
                   "activemq.prefetchSize": os.environ.get("ORDSIM_PREFETCH", "1"), "receipt": "sub"}
            sub.update(extra)
            conn.send("SUBSCRIBE", sub)
            unacked = []
            while True:
                f = conn.frame(QUIET)
                if f is None or len(unacked) >= ACK_EVERY:
                    for ack_id, key, seq in unacked:
                        conn.send("ACK", {"id": ack_id})
                        report("ack", key, seq)
                    unacked = []
                if f is None:
                    continue
                command, headers, _ = f
                if command == "RECEIPT" and not ready:
                    ready = True
                    print(json.dumps({"ready": True}), flush=True)
                elif command == "MESSAGE":
                    key, seq = "k" + headers["ordsim-key"], int(headers["ordsim-seq"])
                    handle(key, seq)
                    unacked.append((headers["ack"], key, seq))
                elif command == "ERROR":
                    raise OSError("ERROR frame: %s" % headers.get("message"))
        except OSError as e:
            print("connection lost (%s), reconnecting" % e, file=sys.stderr, flush=True)
            conn.sock.close()
            time.sleep(0.1)
