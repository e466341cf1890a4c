#!/usr/bin/env python3
"""sse_server.py: a stand-in for Wikimedia EventStreams on 127.0.0.1, for testing
lakehouse-producer's live mode without the internet.

Serves the events of a JSONL recording as SSE frames the way EventStreams does
(":ok" comment, then "event: message", an id that is a JSON array of
topic/partition/offset, one data line, a blank line), and misbehaves on request:

  --fail-429       answer the first request with HTTP 429 and Retry-After: 1
  --drop-after K   on the first connection that gets that far, close the socket after
                   K events and half a frame, as a dropped connection would
  --status CODE    answer every request with CODE (e.g. 404)
  --rate N         send at most N events per second on each connection (in chunks of
                   N/100, sleeping after each, so no interval ever sees more than
                   N x its length plus one chunk), so a client is mid-stream for a while
  --script A,B,... what to do with each request in turn (after the User-Agent check;
                   requests past the end of the list are served normally):
                     ok        serve from Last-Event-ID on, then stay open and silent
                     close:K   K events, then close the connection between two frames
                     drop:K    K events and half a frame, then close (a torn frame)
                     stall:K   K events, then silence on the open connection, so only
                               the client's read timeout can end it
                     CODE      answer HTTP CODE (e.g. 503)
                     CODE:S    the same with Retry-After: S (e.g. 429:2)

Honours Last-Event-ID (resumes after that offset). Refuses, as Wikimedia does, a
request without a User-Agent or with a generic library one (403). After the last
event it keeps the connection open and silent, like a quiet stream.

Prints the port it listens on as its first line of stdout; with --log FILE appends one
JSON line per request (number, status, last_event_id, user_agent, accept, action, and t,
the arrival time in seconds on the server's monotonic clock, so a test can measure the
client's waits between requests), and for a connection that close:, drop: or stall:
ended another line {"n", "end": the action, "sent": complete frames, "last_id": the id
of the last complete frame, "t": when it ended}.
"""
import argparse
import http.server
import json
import socket
import sys
import threading
import time

TOPIC = "eqiad.mediawiki.recentchange"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--file", required=True)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--fail-429", action="store_true")
    ap.add_argument("--drop-after", type=int, default=-1)
    ap.add_argument("--status", type=int, default=0)
    ap.add_argument("--rate", type=int, default=0)
    ap.add_argument("--script", default="")
    ap.add_argument("--log")
    args = ap.parse_args()
    script = []
    for item in filter(None, args.script.split(",")):
        name, _, arg = item.partition(":")
        if name in ("close", "drop", "stall") and not arg.isdigit():
            ap.error("--script action %s needs a count of events, as in %s:3" % (item, name))
        if name in ("ok", "close", "drop", "stall") or name.isdigit():
            script.append((name, int(arg) if arg else None))
        else:
            ap.error("unknown --script action " + item)

    with open(args.file, "rb") as f:
        events = [line.rstrip(b"\r\n") for line in f if line.strip()]
    lock = threading.Lock()
    state = {"requests": 0, "dropped": False}

    def log(entry):
        if args.log:
            with lock, open(args.log, "a") as f:
                f.write(json.dumps(entry) + "\n")

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def log_message(self, fmt, *a):  # quiet: the test reads --log instead
            pass

        def plain(self, code, body, extra=()):
            payload = json.dumps({"status": code, "message": body}).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(payload)))
            for k, v in extra:
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(payload)

        def do_GET(self):
            with lock:
                state["requests"] += 1
                n = state["requests"]
            ua = self.headers.get("User-Agent", "")
            last = self.headers.get("Last-Event-ID")
            action, arg = script[n - 1] if n <= len(script) else ("ok", None)
            entry = {"n": n, "last_event_id": last, "user_agent": ua,
                     "accept": self.headers.get("Accept"), "action": action,
                     "t": time.monotonic()}
            if not ua or ua.startswith(("curl/", "python-requests", "libcurl")):
                entry["status"] = 403
                log(entry)
                return self.plain(403, "Please set a user-agent with contact information")
            if args.status:
                entry["status"] = args.status
                log(entry)
                return self.plain(args.status, "configured failure")
            if action.isdigit():
                entry["status"] = int(action)
                log(entry)
                extra = [("Retry-After", str(arg))] if arg is not None else []
                return self.plain(int(action), "scripted failure", extra)
            if args.fail_429 and n == 1:
                entry["status"] = 429
                log(entry)
                return self.plain(429, "too many connections", [("Retry-After", "1")])
            start = 0
            if last:
                try:
                    start = max(p["offset"] for p in json.loads(last) if "offset" in p) + 1
                except (ValueError, TypeError, KeyError):
                    entry["status"] = 400
                    log(entry)
                    return self.plain(400, "invalid Last-Event-ID")
            entry["status"] = 200
            entry["start"] = start
            log(entry)
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream; charset=utf-8")
            self.send_header("Cache-Control", "no-cache")
            self.end_headers()
            try:
                self.wfile.write(b":ok\n\n")
                sent = 0
                last_id = None
                chunk = max(1, args.rate // 100) if args.rate > 0 else 0
                for i in range(start, len(events)):
                    ident = json.dumps([{"topic": TOPIC, "partition": 0, "offset": i}],
                                       separators=(",", ":")).encode()
                    frame = b"event: message\nid: " + ident + b"\ndata: " + events[i] + b"\n\n"
                    with lock:
                        drop = (args.drop_after >= 0 and not state["dropped"]
                                and sent == args.drop_after)
                        if drop:
                            state["dropped"] = True
                    if action != "ok" and sent == arg:
                        self.wfile.flush()
                        log({"n": n, "end": action, "sent": sent, "last_id": last_id,
                             "t": time.monotonic()})
                        if action == "stall":
                            break
                        drop = action == "drop"
                        if not drop:
                            self.connection.shutdown(socket.SHUT_RDWR)
                            return
                    if drop:
                        self.wfile.write(frame[: len(frame) // 2])
                        self.wfile.flush()
                        self.connection.shutdown(socket.SHUT_RDWR)
                        return
                    self.wfile.write(frame)
                    sent += 1
                    last_id = ident.decode()
                    if chunk and sent % chunk == 0:
                        self.wfile.flush()
                        time.sleep(chunk / args.rate)
                self.wfile.flush()
                while True:  # a quiet stream: no heartbeats, as in production
                    time.sleep(0.5)
            except (BrokenPipeError, ConnectionResetError, OSError):
                return

    server = http.server.ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
