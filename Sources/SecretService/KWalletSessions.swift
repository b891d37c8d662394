import KWalletFormat
import KeychainCore
import KeychainRegistry
import KeychainStore

/// The KWallet face's state, per connection (docs/kwallet.md §3): the handles each connection opened (a
/// random int32 > 0 from the system's CSPRNG, never issued twice while the daemon runs, bound to one
/// connection and one collection, with the count of sessions of each appid that opened it), the opens
/// waiting for an unlock prompt, the transaction ids of `openAsync`, the empty folders per collection (kept in
/// memory, shared by every connection, gone at restart), and the wallet names from kwalletrc. What a client
/// can make it hold is bounded (``appidsPerHandle``, ``emptyFoldersPerCollection``, ``pendingPerConnection``).
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
        /// The sessions on it by appid (the client's word, for `users`): how many `open`s each made. At most
        /// ``KWalletSessions/appidsPerHandle`` appids.
        var appids: [String: Int]
    }

    /// The most distinct appids one handle holds: an `open` with a further one is refused (`-1`), so that
    /// `users` and the handle stay small whatever a client sends.
    static let appidsPerHandle = 64
    /// The most empty folders (`createFolder`) one collection holds: beyond it `createFolder` answers false.
    static let emptyFoldersPerCollection = 1_024
    /// The most requests (opens, deletions, password changes) one connection may have waiting for a prompt:
    /// beyond it the call fails at once.
    static let pendingPerConnection = 16

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
    /// Requests waiting for a prompt, by connection.
    private var pending: [String: [ObjectIdentifier: PendingRequest]] = [:]
    /// The kwalletrc `reconfigure` reads (``KWalletrc/configurationPath()`` at start).
    var kwalletrcPath = KWalletrc.configurationPath()
    /// Whether a `reconfigure` read is under way, and whether another call came meanwhile.
    var rereading = (underWay: false, again: false)

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
    /// else a new one (nil when the CSPRNG fails, or when the handle holds ``appidsPerHandle`` other appids).
    func open(
        _ collection: HeldKeychain, wallet: String, for owner: String, appid: String, path: String
    ) -> Int32? {
        if let number = handles.first(where: { $0.value.owner == owner && $0.value.collection === collection })?.key {
            guard let appids = handles[number]?.appids, appids[appid] != nil || appids.count < Self.appidsPerHandle
            else { return nil }
            handles[number]?.appids[appid, default: 0] += 1
            return number
        }
        guard let number = newHandleNumber() else { return nil }
        handles[number] = Handle(
            number: number, owner: owner, collection: collection, wallet: wallet, path: path, appids: [appid: 1])
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
        guard let sessions = handle.appids[appid] else { return (1, nil) }
        handle.appids[appid] = sessions > 1 ? sessions - 1 : nil
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
            guard handle.appids[appid] != nil else { continue }
            had = true
            handle.appids[appid] = nil
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
        let tickets = pending.removeValue(forKey: owner)?.values.compactMap(\.ticket) ?? []
        return (ended, tickets)
    }

    /// A new request of `owner` on the waiting list: nil when it has ``pendingPerConnection`` waiting already.
    func wait(for owner: String) -> PendingRequest? {
        guard pending[owner, default: [:]].count < Self.pendingPerConnection else { return nil }
        let request = PendingRequest(owner: owner)
        pending[owner, default: [:]][ObjectIdentifier(request)] = request
        return request
    }

    /// Whether `request` is still on the waiting list (not withdrawn).
    func isWaiting(_ request: PendingRequest) -> Bool {
        pending[request.owner]?[ObjectIdentifier(request)] === request
    }

    /// The number of requests waiting, of every connection.
    var pendingCount: Int { pending.values.reduce(0) { $0 + $1.count } }

    /// Takes `request` off the waiting list when its prompt ended: false when it was withdrawn (its client
    /// left), and nothing more is to be done for it.
    func take(_ request: PendingRequest) -> Bool {
        guard isWaiting(request) else { return false }
        pending[request.owner]?[ObjectIdentifier(request)] = nil
        if pending[request.owner]?.isEmpty == true { pending[request.owner] = nil }
        return true
    }

    /// Reads kwalletrc again off the serving thread (on a thread of its own: a file whose read hangs holds
    /// only that thread) and applies its names when the read returns. One read at a time: a call meanwhile
    /// reads once more after it.
    func reread(with registry: KeychainRegistry) {
        guard !rereading.underWay else {
            rereading.again = true
            return
        }
        rereading = (true, false)
        let path = kwalletrcPath
        registry.offLoop(
            onOwnThread: true, { path.map(KWalletrc.read(path:)) ?? KWalletrc() },
            then: { [self] names in
                self.names = names
                let again = rereading.again
                rereading = (false, false)
                if again { reread(with: registry) }
            })
    }
}
