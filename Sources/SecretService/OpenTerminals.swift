import Glibc
import Pinentry

/// The terminals open for prompts, one descriptor per terminal: a client on a terminal that sends many
/// requests at once would otherwise hold a descriptor of its terminal per waiting request, and could use up
/// the daemon's descriptors. Each request still looks its caller's terminal up (and opens it, to be sure it is
/// that terminal); a terminal already open for another request is then kept and the new descriptor closed.
struct OpenTerminals {
    /// A terminal, not kept alive by this table: it is closed when the last request holding it lets go.
    private struct Entry {
        weak var terminal: PromptTerminal?
    }

    private var entries: [String: Entry] = [:]

    /// The terminal to use for `opened`: the one already open with its id when that is the same file (the
    /// same device and inode: a terminal of another devpts instance with the same number is not), else
    /// `opened`, kept for the requests that come next.
    mutating func shared(_ opened: PromptTerminal) -> PromptTerminal {
        if let kept = entries[opened.id]?.terminal, Self.sameFile(kept.descriptor, opened.descriptor) {
            return kept
        }
        entries = entries.filter { $0.value.terminal != nil }
        entries[opened.id] = Entry(terminal: opened)
        return opened
    }

    /// Whether two descriptors are of one file.
    private static func sameFile(_ first: Int32, _ second: Int32) -> Bool {
        var one = stat()
        var other = stat()
        guard fstat(first, &one) == 0, fstat(second, &other) == 0 else { return false }
        return one.st_dev == other.st_dev && one.st_ino == other.st_ino
    }
}
