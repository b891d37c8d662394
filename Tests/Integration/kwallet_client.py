#!/usr/bin/env python3
"""A KWallet client for the KWallet face's tests (test_kwallet_face.py), on jeepney: it opens the network
wallet under an appid of its choosing and does one thing, printing the result as JSON.

  kwallet_client.py [--appid APPID] [--name BUS_NAME] write FOLDER KEY VALUE
  kwallet_client.py [--appid APPID] [--name BUS_NAME] read FOLDER KEY
  kwallet_client.py [--name BUS_NAME] use-handle HANDLE FOLDER KEY   (someone else's handle)
"""

import json
import sys

from jeepney import DBusAddress, new_method_call
from jeepney.io.blocking import open_dbus_connection
from jeepney.low_level import MessageType

PATH = "/modules/kwalletd5"
INTERFACE = "org.kde.KWallet"


def main(argv):
    appid = "kwallet-client"
    name = "org.kde.kwalletd5"
    while argv and argv[0].startswith("--"):
        option, value, argv = argv[0], argv[1], argv[2:]
        if option == "--appid":
            appid = value
        elif option == "--name":
            name = value
    connection = open_dbus_connection(auth_timeout=30)
    address = DBusAddress(PATH, bus_name=name, interface=INTERFACE)

    def call(member, signature=None, *body):
        reply = connection.send_and_get_reply(new_method_call(address, member, signature, body), timeout=60)
        if reply.header.message_type == MessageType.error:
            raise SystemExit(f"{member}: {reply.body}")
        return reply.body[0] if reply.body else None

    command, arguments = argv[0], argv[1:]
    if command == "use-handle":
        handle, folder, key = int(arguments[0]), arguments[1], arguments[2]
        result = {
            "isOpen": call("isOpen", "i", handle),
            "readPassword": call("readPassword", "isss", handle, folder, key, appid),
            "writePassword": call("writePassword", "issss", handle, folder, key, "stolen", appid),
            "removeEntry": call("removeEntry", "isss", handle, folder, key, appid),
            "close": call("close", "ibs", handle, True, appid),
        }
        print(json.dumps(result))
        return 0
    wallet = call("networkWallet")
    handle = call("open", "sxs", wallet, 0, appid)
    if command == "write":
        folder, key, value = arguments
        print(json.dumps({"handle": handle, "result": call("writePassword", "issss", handle, folder, key, value, appid)}))
    elif command == "read":
        folder, key = arguments
        print(json.dumps({"handle": handle, "result": call("readPassword", "isss", handle, folder, key, appid)}))
    else:
        raise SystemExit(f"unknown command {command}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
