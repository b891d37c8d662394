import CDBus

extension DBusMessage {
    /// The bus name the message is addressed to: nil for a broadcast signal. Set on a signal, the bus delivers
    /// it to that connection only (a unicast signal).
    package var destination: String? {
        get { dbus_message_get_destination(pointer).map { String(cString: $0) } }
        set { dbus_message_set_destination(pointer, newValue) }
    }
}
