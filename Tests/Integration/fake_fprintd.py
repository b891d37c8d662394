"""A hostile or broken stand-in for fprintd, for the abuse tests of test_fingerprint.py: it owns
net.reactivated.Fprint on the bus at $DBUS_SYSTEM_BUS_ADDRESS and answers as MODE says.

    fake_fprintd.py silent         owns the name, answers nothing
    fake_fprintd.py garbage        answers every call with ("garbage", 42)
    fake_fprintd.py bad-status     answers like fprintd, then sends VerifyStatus with the wrong types
    fake_fprintd.py no-verdict     answers like fprintd, never sends a VerifyStatus
    fake_fprintd.py match          answers like fprintd, then sends VerifyStatus("verify-match", true)
    fake_fprintd.py forge          owns nothing: sends VerifyStatus("verify-match", true) as if from fprintd's
                                   device, broadcast and to every connection on the bus, every 50 ms

It prints "ready" once it owns the name (or, forging, once connected)."""

import os
import sys
import time

from jeepney import DBusAddress, HeaderFields, MessageType, new_error, new_method_return, new_signal
from jeepney.bus_messages import message_bus
from jeepney.io.blocking import open_dbus_connection

SERVICE = "net.reactivated.Fprint"
DEVICE = "/net/reactivated/Fprint/Device/0"
DEVICE_INTERFACE = "net.reactivated.Fprint.Device"


def status(connection, signature, body, destination=None):
    signal = new_signal(DBusAddress(DEVICE, interface=DEVICE_INTERFACE), "VerifyStatus", signature, body)
    if destination:
        signal.header.fields[HeaderFields.destination] = destination
    connection.send_message(signal)


def forge(connection):
    print("ready", flush=True)
    while True:
        names = connection.send_and_get_reply(message_bus.ListNames(), timeout=5).body[0]
        status(connection, "sb", ("verify-match", True))
        for name in names:
            if name.startswith(":") and name != connection.unique_name:
                status(connection, "sb", ("verify-match", True), destination=name)
        time.sleep(0.05)


def serve(connection, mode):
    reply = connection.send_and_get_reply(message_bus.RequestName(SERVICE, 4), timeout=10)
    if reply.body[0] != 1:
        sys.exit(f"fake_fprintd: could not own {SERVICE}: {reply.body}")
    print("ready", flush=True)
    while True:
        message = connection.receive()
        if message.header.message_type != MessageType.method_call:
            continue
        member = message.header.fields.get(HeaderFields.member)
        if mode == "silent":
            continue
        if mode == "garbage":
            connection.send_message(new_method_return(message, "si", ("garbage", 42)))
            continue
        if member == "GetDefaultDevice":
            connection.send_message(new_method_return(message, "o", (DEVICE,)))
        elif member == "Get":
            connection.send_message(new_method_return(message, "v", (("s", "Fake reader"),)))
        elif member == "ListEnrolledFingers":
            connection.send_message(new_method_return(message, "as", (["right-index-finger"],)))
        elif member in ("Claim", "VerifyStop", "Release"):
            connection.send_message(new_method_return(message))
        elif member == "VerifyStart":
            connection.send_message(new_method_return(message))
            if mode == "bad-status":
                status(connection, "ii", (1, 1))
            elif mode == "match":
                status(connection, "sb", ("verify-match", True))
        else:
            connection.send_message(new_error(message, "org.freedesktop.DBus.Error.UnknownMethod"))


def main():
    mode = sys.argv[1]
    connection = open_dbus_connection(os.environ["DBUS_SYSTEM_BUS_ADDRESS"], auth_timeout=30.0)
    if mode == "forge":
        forge(connection)
    else:
        serve(connection, mode)


if __name__ == "__main__":
    main()
