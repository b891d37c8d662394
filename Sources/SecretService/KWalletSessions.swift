import KWalletFormat
import KeychainCore
import KeychainRegistry
import KeychainStore

/// The KWallet face's state, per connection (docs/kwallet.md §3): the handles each connection opened (a
/// random int32 > 0 from the system's CSPRNG, never issued twice while the daemon runs, bound to one
/// connection and one collection, with a count of sessions and the appids that opened them), the opens
/// waiting for an unlock prompt, the transaction ids of `openAsync`, the empty folders per collection (kept in
/// memory, shared by every connection, gone at restart), and the wallet names from kwalletrc.
final class KWalletSessions {
    /// One connection's handle on one collection.
    struct Handle {
        /// The number clients pass.
        let number: Int32
        /// The unique bus name of the connection that opened it: the only one that may use it.
        let owner: String
        /// The collection it opens.
        let collection: HeldKeychain
        /// The wallet name it was opened by (what signals about it say).
        let wallet: String
        /// The object path it was opened at (`/modules/kwalletd5` or `…6`): its signals come from there.
        let path: String
        /// The appid of each session on it, one per `open` (the client's word, for `users`).
        var appids: [String]
    }

    /// An `open`, `openAsync` or `deleteWallet` waiting for a prompt (an unlock, a confirmation): withdrawn
    /// when its connection leaves.
    final class PendingRequest {
        let owner: String
        var ticket: PromptTicket?
        init(owner: String) { self.owner = owner }
    }

    /// The names kwalletrc gives, read at start and on `reconfigure`.
    var names: KWalletrc
    private(set) var handles: [Int32: Handle] = [:]
    private var issued: Set<Int32> = []
    private var lastTransaction: Int32 = 0
    /// Empty folders made by `createFolder`, by collection id.
    var emptyFolders: [String: Set<String>] = [:]
    /// Requests waiting for a prompt.
    var pending: [PendingRequest] = []

    /// The state of a daemon starting, with the names of the user's kwalletrc.
    init(names: KWalletrc = .current()) {
        self.names = names
    }

    /// `owner`'s live handle `number`: nil for an unknown number, another connection's handle, or one whose
    /// collection is gone or locked.
    func handle(_ number: Int32, of owner: String, in registry: KeychainRegistry) -> Handle? {
        guard number > 0, let handle = handles[number], handle.owner == owner,
            registry.keychain(id: handle.collection.id) === handle.collection, !handle.collection.isLocked
        else { return nil }
        return handle
    }

    /// `owner`'s handle on `collection`, one more session on it for `appid`: the same handle when it has one,
    /// else a new one (nil only when the CSPRNG fails).
    func open(
        _ collection: HeldKeychain, wallet: String, for owner: String, appid: String, path: String
    ) -> Int32? {
        if let number = handles.first(where: { $0.value.owner == owner && $0.value.collection === collection })?.key {
            handles[number]?.appids.append(appid)
            return number
        }
        guard let number = newHandleNumber() else { return nil }
        handles[number] = Handle(
            number: number, owner: owner, collection: collection, wallet: wallet, path: path, appids: [appid])
        return number
    }

    /// A random int32 > 0 never issued before.
    private func newHandleNumber() -> Int32? {
        for _ in 0..<64 {
            var raw: UInt32 = 0
            guard
                (try? withUnsafeMutableBytes(of: &raw) { (buffer) throws(KeychainError) in try SecureRandom.fill(buffer)
                })
                    != nil
            else { return nil }
            let number = Int32(bitPattern: raw & 0x7FFF_FFFF)
            if number > 0, issued.insert(number).inserted { return number }
        }
        return nil
    }

    /// Drops one session of `appid` on `owner`'s handle `number`: 0 when the handle ended (its last session),
    /// 1 while others remain or when `appid` has none on it, -1 when it is not `owner`'s handle. `force` ends
    /// the handle whatever its count.
    func close(_ number: Int32, of owner: String, appid: String, force: Bool) -> (result: Int32, ended: Handle?) {
        guard var handle = handles[number], handle.owner == owner else { return (-1, nil) }
        guard let position = handle.appids.firstIndex(of: appid) else { return (1, nil) }
        handle.appids.remove(at: position)
        guard handle.appids.isEmpty || force else {
            handles[number] = handle
            return (1, nil)
        }
        handles[number] = nil
        return (0, handle)
    }

    /// Ends the handles `matching` says, each once: the ones ended.
    func end(where matching: (Handle) -> Bool) -> [Handle] {
        let ended = handles.values.filter(matching).sorted { $0.number < $1.number }
        for handle in ended { handles[handle.number] = nil }
        return ended
    }

    /// Drops the sessions of `appid` on `owner`'s handles on `collection`: the handles that ended, and whether
    /// there was any such session.
    func disconnect(_ appid: String, of owner: String, on collection: HeldKeychain) -> (ended: [Handle], had: Bool) {
        var had = false
        var ended: [Handle] = []
        for (number, var handle) in handles where handle.owner == owner && handle.collection === collection {
            guard handle.appids.contains(appid) else { continue }
            had = true
            handle.appids.removeAll { $0 == appid }
            if handle.appids.isEmpty {
                handles[number] = nil
                ended.append(handle)
            } else {
                handles[number] = handle
            }
        }
        return (ended, had)
    }

    /// A new `openAsync` transaction id (> 0).
    func nextTransaction() -> Int32 {
        lastTransaction = lastTransaction == Int32.max ? 1 : lastTransaction + 1
        return lastTransaction
    }

    /// Forgets everything of a connection that left the bus: its handles (returned) and waiting opens (their
    /// tickets, to withdraw).
    func forget(_ owner: String) -> (handles: [Handle], tickets: [PromptTicket]) {
        let ended = end { $0.owner == owner }
        let tickets = pending.filter { $0.owner == owner }.compactMap(\.ticket)
        pending.removeAll { $0.owner == owner }
        return (ended, tickets)
    }

    /// Takes `request` off the waiting list when its prompt ended: false when it was withdrawn (its client
    /// left), and nothing more is to be done for it.
    func take(_ request: PendingRequest) -> Bool {
        guard pending.contains(where: { $0 === request }) else { return false }
        pending.removeAll { $0 === request }
        return true
    }
}
