import AccessControl
import DBus
import KeychainCore
import KeychainRegistry

/// What each application stored through this daemon, across collections, for the per-application quotas
/// (``InputLimits/itemsPerApplication``, ``InputLimits/bytesPerApplication``; docs/robustness.md, "Bounds and
/// quotas"): one application cannot fill the shared per-collection quotas and so refuse every other one.
///
/// Kept as running totals, never counted by a scan: an item counts against the application that stored it
/// (made it, or last replaced its secret) while this daemon runs, with the bytes it brought; a delete (of the
/// item, or of its collection) gives them back. Items stored before the daemon started count against nobody:
/// who made an item is in its access list, which is sealed, so counting them at start would open every item
/// of every unlocked collection (and could not see the locked ones). The per-collection quotas bound those.
struct ApplicationUsage {
    /// An application's bucket: its name (``CallerIdentity/Application/name``: a Flatpak app by its app id),
    /// or one bucket for every caller the daemon could not identify.
    typealias Bucket = String

    /// The bucket of callers that could not be identified.
    static let unidentified: Bucket = "unidentified"

    /// Where an item lives: its collection (the object: one deleted and made again is another) and reference.
    struct ItemKey: Hashable {
        let collection: ObjectIdentifier
        let reference: ItemReference

        init(_ held: HeldKeychain, _ reference: ItemReference) {
            self.collection = ObjectIdentifier(held)
            self.reference = reference
        }
    }

    private var totals: [Bucket: (items: Int, bytes: Int)] = [:]
    private var stored: [ItemKey: (bucket: Bucket, bytes: Int)] = [:]

    /// The bucket `requester` counts in.
    static func bucket(of requester: Requester) -> Bucket {
        switch requester {
        case .application(let application): application.name
        case .unidentified: unidentified
        }
    }

    /// What `bucket` holds now.
    func usage(of bucket: Bucket) -> (items: Int, bytes: Int) { totals[bucket] ?? (0, 0) }

    /// Refuses (`LimitsExceeded`) storing `bytes` at `key` (nil: a new item) for `bucket` (`named` in the
    /// message) when it would take the bucket past `limits`: a new item counts one more; one that replaces what
    /// the same bucket stored there gives that back first.
    func check(_ bucket: Bucket, named name: String, storing bytes: Int, at key: ItemKey?, _ limits: InputLimits)
        throws(DBusError)
    {
        var (items, held) = usage(of: bucket)
        if let key, let previous = stored[key], previous.bucket == bucket {
            held -= previous.bytes
        } else {
            guard items < limits.itemsPerApplication else {
                throw DBusError(
                    .limitsExceeded,
                    "\(name) already stored \(items) items, the most one application may (\(limits.itemsPerApplication))"
                )
            }
            items += 1
        }
        guard held + bytes <= limits.bytesPerApplication else {
            throw DBusError(
                .limitsExceeded,
                "\(name) would store more than \(limits.bytesPerApplication) bytes, the most one application may"
                    + " (it stored \(held))")
        }
    }

    /// Counts `bytes` at `key` against `bucket` (what was counted there before, against whichever bucket, given
    /// back first).
    mutating func record(_ bucket: Bucket, storing bytes: Int, at key: ItemKey) {
        release(key)
        stored[key] = (bucket, bytes)
        let (items, held) = usage(of: bucket)
        totals[bucket] = (items + 1, held + bytes)
    }

    /// Gives back what the item at `key` counted, if anything.
    mutating func release(_ key: ItemKey) {
        guard let previous = stored.removeValue(forKey: key) else { return }
        let (items, held) = usage(of: previous.bucket)
        totals[previous.bucket] = items > 1 ? (items - 1, held - previous.bytes) : nil
    }

    /// Gives back what every item of `held` counted (the collection was deleted).
    mutating func release(collection held: HeldKeychain) {
        let id = ObjectIdentifier(held)
        for key in stored.keys where key.collection == id { release(key) }
    }
}

extension SecretServiceDaemon {
    /// The bucket `sender` stores in, and how an error names it; nil when callers are not identified (an
    /// embedding trusts its callers: no per-application quota).
    private func usageBucket(of sender: String) -> (bucket: ApplicationUsage.Bucket, name: String)? {
        guard callers != nil else { return nil }
        let requester = requester(of: sender)
        switch requester {
        case .application(let application): return (ApplicationUsage.bucket(of: requester), application.description)
        case .unidentified: return (ApplicationUsage.unidentified, "a caller Latchkey could not identify")
        }
    }

    /// Refuses (`LimitsExceeded`) `sender` storing an item of `bytes` in `held` (replacing `reference`, or a new
    /// item) past the per-application quotas.
    func checkApplicationQuota(
        of sender: String, storing bytes: Int, in held: HeldKeychain, replacing reference: ItemReference?
    ) throws(DBusError) {
        guard let (bucket, name) = usageBucket(of: sender) else { return }
        try applicationUsage.check(
            bucket, named: name, storing: bytes, at: reference.map { ApplicationUsage.ItemKey(held, $0) }, limits)
    }

    /// Counts the item `sender` stored at `reference` in `held`, of `bytes`, against its application.
    func recordApplicationUsage(
        of sender: String, storing bytes: Int, in held: HeldKeychain, at reference: ItemReference
    ) {
        guard let (bucket, _) = usageBucket(of: sender) else { return }
        applicationUsage.record(bucket, storing: bytes, at: ApplicationUsage.ItemKey(held, reference))
    }

    /// Gives back what the items `references` of `held` counted (they were deleted).
    func releaseApplicationUsage(in held: HeldKeychain, _ references: [ItemReference]) {
        for reference in references { applicationUsage.release(ApplicationUsage.ItemKey(held, reference)) }
    }
}
