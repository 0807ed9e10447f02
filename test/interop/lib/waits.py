"""Small helpers of the Python suites: a free loopback port, polling until a condition holds."""
import socket
import time


def free_port():
    """A TCP port on 127.0.0.1 that nothing listened on a moment ago."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wait_for(fn, timeout=15.0, step=0.05):
    """Polls fn() until it returns a true value; returns that value or None at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        v = fn()
        if v or time.monotonic() > deadline:
            return v
        time.sleep(step)
