import DBus
import KWalletFormat
import KeychainCore
import KeychainRegistry
import Posix

/// `/modules/kwalletd5` and `/modules/kwalletd6`: KDE's `org.kde.KWallet`, over the same collections and items
/// as the Secret Service (docs/kwallet.md). A wallet is a collection (the names kwalletrc gives are the
/// `default` one), a folder an item's `server` attribute, a key its `user`. Handles are per connection
/// (``KWalletSessions``). As kwalletd5 does, no call ever answers a D-Bus error for what it is given: a bad
/// or foreign handle, a name past the bounds or a value that does not parse gets KDE's failure value (`-1`,
/// `false`, empty); only a call of the wrong signature is `InvalidArgs`.
struct KWalletObject: DBusObject {
    let daemon: SecretServiceDaemon
    /// The path called: signals about a handle come from where it was opened.
    let path: String

    static let interfaceName = "org.kde.KWallet"
    /// Where the object is served (kwalletd5's and kwalletd6's paths).
    static let paths = ["/modules/kwalletd5", "/modules/kwalletd6"]

    /// The list of wallets changed.
    static let walletListDirty = DBusSignal(interfaceName, "walletListDirty")
    /// A wallet was made.
    static let walletCreated = DBusSignal(interfaceName, "walletCreated", DBusInput("wallet", String.self))
    /// A wallet was opened (its keychain unlocked).
    static let walletOpened = DBusSignal(interfaceName, "walletOpened", DBusInput("wallet", String.self))
    /// `openAsync`'s answer: the transaction id and the handle (`-1`: not opened). To the caller only.
    static let walletAsyncOpened = DBusSignal(
        interfaceName, "walletAsyncOpened", DBusInput("tId", Int32.self), DBusInput("handle", Int32.self))
    /// A wallet was deleted.
    static let walletDeleted = DBusSignal(interfaceName, "walletDeleted", DBusInput("wallet", String.self))
    /// A wallet was closed (its keychain locked).
    static let walletClosed = DBusSignal(interfaceName, "walletClosed", DBusInput("wallet", String.self))
    /// A handle ended (deprecated form). To its owner only.
    static let walletClosedHandle = DBusSignal(interfaceName, "walletClosed", DBusInput("handle", Int32.self))
    /// A handle ended. To its owner only.
    static let walletClosedId = DBusSignal(interfaceName, "walletClosedId", DBusInput("handle", Int32.self))
    /// No handle is left anywhere (the last open keychain locked).
    static let allWalletsClosed = DBusSignal(interfaceName, "allWalletsClosed")
    /// A wallet's folders changed.
    static let folderListUpdated = DBusSignal(interfaceName, "folderListUpdated", DBusInput("wallet", String.self))
    /// A folder's entries changed.
    static let folderUpdated = DBusSignal(
        interfaceName, "folderUpdated", DBusInput("wallet", String.self), DBusInput("folder", String.self))
    /// Sessions of an appid on a wallet were dropped. To the handle's owner only.
    static let applicationDisconnected = DBusSignal(
        interfaceName, "applicationDisconnected", DBusInput("wallet", String.self),
        DBusInput("application", String.self))

    static let interfaces: [DBusInterface<KWalletObject>] =
        standardInterfaces() + [
            DBusInterface(
                interfaceName, methods: openingMethods + walletMethods + readingMethods + writingMethods,
                signals: [
                    walletListDirty.declaration, walletCreated.declaration, walletOpened.declaration,
                    walletAsyncOpened.declaration, walletDeleted.declaration, walletClosed.declaration,
                    walletClosedHandle.declaration, walletClosedId.declaration, allWalletsClosed.declaration,
                    folderListUpdated.declaration, folderUpdated.declaration, applicationDisconnected.declaration,
                ])
        ]

    // MARK: Declarations

    private static func returnsInt() -> [DBusArgumentDescription] { [.init("result", Int32.self)] }
    private static func returnsBool() -> [DBusArgumentDescription] { [.init("result", Bool.self)] }
    private static func returnsList() -> [DBusArgumentDescription] { [.init("result", [String].self)] }
    private static func returnsMap() -> [DBusArgumentDescription] { [.init("result", DBusPropertyList.self)] }
    private static func returnsBytes() -> [DBusArgumentDescription] { [.init("result", [UInt8].self)] }

    private static let handleInput = DBusInput("handle", Int32.self)
    private static let folderInput = DBusInput("folder", String.self)
    private static let keyInput = DBusInput("key", String.self)
    private static let appidInput = DBusInput("appid", String.self)
    private static let walletInput = DBusInput("wallet", String.self)
    private static let windowInput = DBusInput("wId", Int64.self)

    private static let openingMethods: [DBusMethod<KWalletObject>] = [
        DBusMethod("isEnabled", returns: returnsBool()) { _, _ in .reply([.bool(true)]) },
        DBusMethod("open", walletInput, windowInput, appidInput, returns: returnsInt()) {
            object, call, wallet, window, appid in
            object.open(wallet, window: window, appid: appid, call: call)
        },
        DBusMethod("openPath", DBusInput("path", String.self), windowInput, appidInput, returns: returnsInt()) {
            _, _, _, _, _ in .reply([.int32(-1)])
        },
        DBusMethod(
            "openAsync", walletInput, windowInput, appidInput, DBusInput("handleSession", Bool.self),
            returns: returnsInt()
        ) { object, call, wallet, window, appid, _ in
            object.openAsync(wallet, window: window, appid: appid, call: call)
        },
        DBusMethod(
            "openPathAsync", DBusInput("path", String.self), windowInput, appidInput,
            DBusInput("handleSession", Bool.self), returns: returnsInt()
        ) { _, _, _, _, _, _ in .reply([.int32(-1)]) },
        DBusMethod("close", walletInput, DBusInput("force", Bool.self), returns: returnsInt()) {
            object, call, wallet, _ in
            .reply([.int32(object.close(wallet: wallet, caller: call.sender))])
        },
        DBusMethod("close", handleInput, DBusInput("force", Bool.self), appidInput, returns: returnsInt()) {
            object, call, handle, force, appid in
            .reply([.int32(object.close(handle: handle, force: force, appid: appid, caller: call.sender))])
        },
        DBusMethod("sync", handleInput, appidInput) { _, _, _, _ in .reply([]) },
        DBusMethod("isOpen", walletInput, returns: returnsBool()) { object, _, wallet in
            .reply([.bool(object.collection(named: wallet).map { !$0.isLocked } ?? false)])
        },
        DBusMethod("isOpen", handleInput, returns: returnsBool()) { object, call, handle in
            .reply([.bool(object.session(handle, call) != nil)])
        },
        DBusMethod("closeAllWallets") { object, call in
            object.endHandles(object.sessions.end { $0.owner == call.sender })
            return .reply([])
        },
        DBusMethod(
            "disconnectApplication", walletInput, DBusInput("application", String.self), returns: returnsBool()
        ) { object, call, wallet, application in
            .reply([.bool(object.disconnect(application, from: wallet, caller: call.sender))])
        },
        DBusMethod("users", walletInput, returns: returnsList()) { object, call, wallet in
            .reply([object.users(of: wallet, caller: call.sender).dbusValue])
        },
        // Accepted and ignored: it never unlocks or creates a keychain (docs/kwallet.md §5).
        DBusMethod(
            "pamOpen", walletInput, DBusInput("passwordHash", [UInt8].self), DBusInput("sessionTimeout", Int32.self)
        ) { object, _, wallet, hash, _ in
            object.pamOpen(wallet, hash: hash)
            return .reply([])
        },
    ]

    private static let walletMethods: [DBusMethod<KWalletObject>] = [
        DBusMethod("wallets", returns: returnsList()) { object, _ in .reply([object.walletNames().dbusValue]) },
        DBusMethod("deleteWallet", walletInput, returns: returnsInt()) { object, call, wallet in
            object.deleteWallet(wallet, call: call)
        },
        // Declared without a result, as the XML does; the reply comes when the change prompt ends.
        DBusMethod("changePassword", walletInput, windowInput, appidInput) { object, call, wallet, window, _ in
            object.changePassword(of: wallet, window: window, call: call)
        },
        DBusMethod("networkWallet", returns: [.init("result", String.self)]) { object, _ in
            .reply([.string(object.sessions.names.networkWallet)])
        },
        DBusMethod("localWallet", returns: [.init("result", String.self)]) { object, _ in
            .reply([.string(object.sessions.names.localWallet)])
        },
        DBusMethod("reconfigure") { object, _ in
            object.sessions.reread(with: object.daemon.registry)
            return .reply([])
        },
        DBusMethod("folderDoesNotExist", walletInput, folderInput, returns: returnsBool()) {
            object, _, wallet, folder in
            .reply([.bool(object.doesNotExist(wallet: wallet, folder: folder, key: nil))])
        },
        DBusMethod("keyDoesNotExist", walletInput, folderInput, keyInput, returns: returnsBool()) {
            object, _, wallet, folder, key in
            .reply([.bool(object.doesNotExist(wallet: wallet, folder: folder, key: key))])
        },
    ]

    private static let readingMethods: [DBusMethod<KWalletObject>] = [
        DBusMethod("folderList", handleInput, appidInput, returns: returnsList()) { object, call, handle, _ in
            .reply([object.folders(handle, call).dbusValue])
        },
        DBusMethod("hasFolder", handleInput, folderInput, appidInput, returns: returnsBool()) {
            object, call, handle, folder, _ in
            .reply([.bool(object.hasFolder(handle, folder, call))])
        },
        DBusMethod("entryList", handleInput, folderInput, appidInput, returns: returnsList()) {
            object, call, handle, folder, _ in
            .reply([(object.entries(handle, folder, call)?.entries.map(\.key) ?? []).dbusValue])
        },
        DBusMethod("hasEntry", handleInput, folderInput, keyInput, appidInput, returns: returnsBool()) {
            object, call, handle, folder, key, _ in
            .reply([.bool(object.entry(handle, folder, key, call) != nil)])
        },
        DBusMethod("entryType", handleInput, folderInput, keyInput, appidInput, returns: returnsInt()) {
            object, call, handle, folder, key, _ in
            .reply([.int32(object.entry(handle, folder, key, call)?.entry.form.entryType.rawValue ?? 0)])
        },
        DBusMethod("readEntry", handleInput, folderInput, keyInput, appidInput, returns: returnsBytes()) {
            object, call, handle, folder, key, _ in
            object.readOne(handle, folder, key, .entry, call: call)
        },
        DBusMethod("readMap", handleInput, folderInput, keyInput, appidInput, returns: returnsBytes()) {
            object, call, handle, folder, key, _ in
            object.readOne(handle, folder, key, .map, call: call)
        },
        DBusMethod(
            "readPassword", handleInput, folderInput, keyInput, appidInput, returns: [.init("result", String.self)]
        ) { object, call, handle, folder, key, _ in
            object.readOne(handle, folder, key, .password, call: call)
        },
        DBusMethod("entriesList", handleInput, folderInput, appidInput, returns: returnsMap()) {
            object, call, handle, folder, _ in
            object.readMany(handle, folder, pattern: nil, .entry, call: call)
        },
        DBusMethod("passwordList", handleInput, folderInput, appidInput, returns: returnsMap()) {
            object, call, handle, folder, _ in
            object.readMany(handle, folder, pattern: nil, .password, call: call)
        },
        DBusMethod("mapList", handleInput, folderInput, appidInput, returns: returnsMap()) {
            object, call, handle, folder, _ in
            object.readMany(handle, folder, pattern: nil, .map, call: call)
        },
        DBusMethod("readEntryList", handleInput, folderInput, keyInput, appidInput, returns: returnsMap()) {
            object, call, handle, folder, key, _ in
            object.readMany(handle, folder, pattern: key, .entry, call: call)
        },
        DBusMethod("readPasswordList", handleInput, folderInput, keyInput, appidInput, returns: returnsMap()) {
            object, call, handle, folder, key, _ in
            object.readMany(handle, folder, pattern: key, .password, call: call)
        },
        DBusMethod("readMapList", handleInput, folderInput, keyInput, appidInput, returns: returnsMap()) {
            object, call, handle, folder, key, _ in
            object.readMany(handle, folder, pattern: key, .map, call: call)
        },
    ]

    private static let writingMethods: [DBusMethod<KWalletObject>] = [
        DBusMethod("createFolder", handleInput, folderInput, appidInput, returns: returnsBool()) {
            object, call, handle, folder, _ in
            .reply([.bool(object.createFolder(handle, folder, call))])
        },
        DBusMethod("removeFolder", handleInput, folderInput, appidInput, returns: returnsBool()) {
            object, call, handle, folder, _ in
            object.removeFolder(handle, folder, call: call)
        },
        DBusMethod(
            "writeEntry", handleInput, folderInput, keyInput, DBusInput("value", [UInt8].self),
            DBusInput("entryType", Int32.self), appidInput, returns: returnsInt()
        ) { object, call, handle, folder, key, value, type, _ in
            object.write(handle, folder, key, wire: value, type: KWalletEntryType(rawValue: type), call: call)
        },
        DBusMethod(
            "writeEntry", handleInput, folderInput, keyInput, DBusInput("value", [UInt8].self), appidInput,
            returns: returnsInt()
        ) { object, call, handle, folder, key, value, _ in
            object.write(handle, folder, key, wire: value, type: .stream, call: call)
        },
        DBusMethod(
            "writeMap", handleInput, folderInput, keyInput, DBusInput("value", [UInt8].self), appidInput,
            returns: returnsInt()
        ) { object, call, handle, folder, key, value, _ in
            object.write(handle, folder, key, wire: value, type: .map, call: call)
        },
        DBusMethod(
            "writePassword", handleInput, folderInput, keyInput, DBusInput("value", String.self), appidInput,
            returns: returnsInt()
        ) { object, call, handle, folder, key, value, _ in
            object.writePassword(handle, folder, key, value, call: call)
        },
        DBusMethod(
            "renameEntry", handleInput, folderInput, DBusInput("oldName", String.self),
            DBusInput("newName", String.self), appidInput, returns: returnsInt()
        ) { object, call, handle, folder, oldName, newName, _ in
            object.rename(handle, folder, oldName, to: newName, call: call)
        },
        DBusMethod("removeEntry", handleInput, folderInput, keyInput, appidInput, returns: returnsInt()) {
            object, call, handle, folder, key, _ in
            object.removeEntry(handle, folder, key, call: call)
        },
    ]
}
