"""A tiny HTTPS/1.1 client for the tests (stdlib http.client): request() and watch()."""
import http.client
import json
import ssl
import time


class Client:
    def __init__(self, port, ca, token=None):
        self.port, self.token = port, token
        self.ctx = ssl.create_default_context(cafile=ca)

    def conn(self, timeout=30):
        return http.client.HTTPSConnection("127.0.0.1", self.port, context=self.ctx, timeout=timeout)

    def headers(self, extra=None, token=None):
        h = {"Accept": "application/json", "User-Agent": "transcript-recorder/1.0 (python http.client)"}
        tok = self.token if token is None else token
        if tok:
            h["Authorization"] = f"Bearer {tok}"
        h.update(extra or {})
        return {k: v for k, v in h.items() if v is not None}

    def request(self, method, path, body=None, headers=None, token=None):
        """Returns (status, headers dict (lower-case keys), raw body bytes, parsed body or None)."""
        c = self.conn()
        data = None
        hdrs = self.headers(headers, token)
        if body is not None:
            data = body.encode() if isinstance(body, str) else json.dumps(body, separators=(",", ":")).encode()
            hdrs.setdefault("Content-Type", "application/json")
        c.request(method, path, data, hdrs)
        r = c.getresponse()
        raw = r.read()
        c.close()
        try:
            parsed = json.loads(raw) if raw else None
        except ValueError:
            parsed = None
        return r.status, {k.lower(): v for k, v in r.getheaders()}, raw, parsed

    def watch(self, path, until=None, timeout=10, token=None):
        """Read a watch stream until it ends, `until(events)` is true, or timeout; returns events."""
        c = self.conn(timeout)
        c.request("GET", path, None, self.headers(None, token))
        r = c.getresponse()
        events, buf = [], b""
        end = time.time() + timeout
        try:
            while time.time() < end:
                chunk = r.read1(65536)
                if not chunk:
                    break
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    if line.strip():
                        events.append(json.loads(line))
                if until and until(events):
                    break
        except TimeoutError:
            pass
        finally:
            c.close()
        return r.status, events
