"""A lock and an unlock of a login keychain with N items (docs/robustness.md, "A lock of thousands of items"):
how long another client's calls, made back to back meanwhile, waited. python3 Benchmarks/lock_announcements.py BINARY [N]"""
import json
import pathlib
import shutil
import sys
import tempfile
import threading
import time
ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "Benchmarks"))
sys.path.insert(0, str(ROOT / "Tests" / "Integration"))
import robustness as r
from dbus_client import Client
from jeepney import DBusAddress, new_method_call, MatchRule, message_bus
from jeepney.io.blocking import Proxy

binary = sys.argv[1]; count = int(sys.argv[2]) if len(sys.argv) > 2 else 5000
scratch = tempfile.mkdtemp(prefix="lockbench-")
server = r.Latchkeyd(scratch, binary, answers=[f"password {r.PASSWORD}"] * 20)
server.start()
try:
    filler = Client(server.bus.address)
    session = filler.open_plain()
    for n in range(count):
        filler.create_item(session, {"service": "many.example", "user": f"user{n}"}, b"s", label=f"Item {n}",
                           collection=r.LOGIN)
    filler.close()
    # A client that follows the items' properties, as a GDBus proxy does.
    watcher = Client(server.bus.address)
    Proxy(message_bus, watcher.connection).AddMatch(MatchRule(type="signal", interface="org.freedesktop.DBus.Properties",
                                                              member="PropertiesChanged"))
    got = []
    stop = threading.Event()
    def watch():
        while not stop.is_set():
            try:
                m = watcher.connection.receive(timeout=0.2)
            except TimeoutError:
                continue
            if str(m.header.fields.get(1, "")).startswith(r.LOGIN + "/"):
                got.append(time.monotonic())
    t = threading.Thread(target=watch); t.start()
    other = Client(server.bus.address)
    results = []
    for round_ in range(3):
        for action in ("lock", "unlock"):
            got.clear()
            actor = Client(server.bus.address)
            start = time.monotonic()
            if action == "lock":
                actor.connection.send(new_method_call(DBusAddress(r.SERVICE, bus_name="org.freedesktop.secrets",
                    interface=r.SECRET_SERVICE), "Lock", "ao", ([r.LOGIN],)))
            else:
                done = []
                th = threading.Thread(target=lambda: done.append(r.unlock_through_prompt(actor, r.LOGIN)))
                th.start()
            waits = []
            deadline = start + 60
            while (len(got) < count or (action == "unlock" and th.is_alive())) and time.monotonic() < deadline:
                s = time.monotonic()
                other.ok("/org/freedesktop/secrets", "org.freedesktop.DBus.Properties", "Get", "ss",
                         ("org.freedesktop.Secret.Service", "Collections"))
                waits.append(time.monotonic() - s)
            if action == "unlock": th.join()
            results.append({"action": action, "signals": len(got),
                            "all_signals_ms": round((got[-1] - start) * 1000) if got else None,
                            "calls": len(waits), "max_wait_ms": round(max(waits) * 1000),
                            "median_wait_ms": round(sorted(waits)[len(waits) // 2] * 1000)})
            actor.close()
            print(json.dumps(results[-1]), flush=True)
    stop.set(); t.join()
finally:
    server.close(); shutil.rmtree(scratch, ignore_errors=True)
