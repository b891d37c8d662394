import DBus
import FoundationEssentials
import Keychain1
import KeychainCore
import KeychainRegistry
import KeychainStore
import Pinentry
import Posix

/// `/org/latchkey/keychain`: `org.latchkey.Keychain1`'s list of keychains.
struct Keychain1ListObject: DBusObject {
    let daemon: SecretServiceDaemon

    var childNodes: [String] { daemon.registry.keychains.map(\.id) }

    static let interfaces: [DBusInterface<Keychain1ListObject>] =
        standardInterfaces() + [
            DBusInterface(
                Keychain1Interface.interface,
                methods: [
                    // A session for this connection's secrets (docs/dbus-mapping.md, "Keychain1 sessions").
                    DBusMethod(
                        "OpenSession", DBusInput("algorithm", String.self), DBusInput("input", DBusVariant.self),
                        returns: [.init("output", DBusVariant.self), .init("session", ObjectPath.self)]
                    ) { (object, call, algorithm, input) throws(DBusError) in
                        .reply(
                            try object.daemon.openKeychainSession(algorithm, input.value.unwrapped, caller: call.sender)
                        )
                    },
                    DBusMethod("List", returns: [.init("keychains", "aa{sv}")]) { object, _ in
                        .reply([
                            .array(
                                elementSignature: "a{sv}",
                                object.daemon.registry.keychains.map { Keychain1Interface.encode($0.description) })
                        ])
                    },
                    // The keychains named (every one held in a file when none is) as a CXF file, age-encrypted unless
                    // `unencrypted`, once the person allowed it (Keychain1Exchange.swift, docs/export-import.md).
                    DBusMethod(
                        "Export", DBusInput("keychains", [String].self), DBusInput("recipients", [String].self),
                        DBusInput("passphrase", [UInt8].self), DBusInput("unencrypted", Bool.self),
                        returns: [
                            .init("file", [UInt8].self), .init("items", UInt32.self), .init("leftOut", UInt32.self),
                        ]
                    ) { (object, call, keychains, recipients, passphrase, unencrypted) throws(DBusError) in
                        try object.daemon.export(
                            keychains: keychains, recipients: recipients, passphrase: passphrase,
                            unencrypted: unencrypted, call: call)
                    },
                    // The desktop session's display, language and pinentry, for the prompts shown from now on
                    // (`latchkey update-environment`; docs/dbus-mapping.md).
                    DBusMethod("UpdateEnvironment", DBusInput("variables", [String: String].self)) {
                        (object, call, variables) throws(DBusError) in
                        // Where every later prompt shows is the desktop session's to say: not a sandboxed
                        // application's (it could send the prompts to a display of its own and answer them),
                        // nor a caller the daemon could not identify.
                        try object.daemon.refuse(unlessAllowed: .choosePromptDisplay, by: call.sender)
                        do throws(SessionEnvironmentError) {
                            try object.daemon.registry.updateSessionEnvironment(variables)
                        } catch {
                            throw DBusError(.invalidArgs, error.description)
                        }
                        return .reply([])
                    },
                ])
        ]
}
