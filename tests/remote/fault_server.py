#!/usr/bin/env python3
"""A file server for the remote tests' faults: serves FILE's ranges on 127.0.0.1:PORT as a server
that honours Range and If-Range does, with one fault chosen by MODE:
  changing  a new ETag for every request (the file replaced between any two ranges)
  flaky     503 for the first request, then correct answers
Usage: fault_server.py MODE FILE PORT"""
import http.server
import os
import sys

mode, path, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
requests = 0


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        global requests
        requests += 1
        if mode == "flaky" and requests == 1:
            self.send_response(503)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        etag = f'"v{requests}"' if mode == "changing" else '"v1"'
        size = os.path.getsize(path)
        first, last = 0, size - 1
        ranged = self.headers.get("Range", "").startswith("bytes=")
        if_range = self.headers.get("If-Range")
        if ranged and (if_range is None or if_range == etag):
            a, b = self.headers["Range"][6:].split("-")
            first, last = int(a), min(int(b), size - 1)
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {first}-{last}/{size}")
        else:
            self.send_response(200)
        self.send_header("ETag", etag)
        self.send_header("Content-Length", str(last - first + 1))
        self.end_headers()
        with open(path, "rb") as f:
            f.seek(first)
            left = last - first + 1
            try:
                while left > 0:
                    chunk = f.read(min(left, 1 << 16))
                    self.wfile.write(chunk)
                    left -= len(chunk)
            except (BrokenPipeError, ConnectionResetError):
                pass


http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()
