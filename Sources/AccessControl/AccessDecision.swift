import CallerIdentity
import KeychainRegistry

/// What the access rules (``AccessRules``) answer when a caller asks to use an item or to do something that is
/// the person's to decide (docs/threat-model.md, "Access lists"): one of three outcomes, each naming itself.
/// A face (the Secret Service, `org.latchkey.Keychain1`, later KWallet's) serves `.allowed` at once, defers its
/// reply while `.ask` is put to the person (``KeychainRegistry/promptForAccess(sharingKey:client:question:failure:trust:isAllowed:completion:)``),
/// and answers `.denied` with its own error.
package enum AccessDecision: Sendable, Equatable {
    /// Served without asking: the item trusts the caller, the keychain's policy is `allow-all`, callers are not
    /// identified at all, or the action is one any identified program of the user may do.
    case allowed
    /// Served only once the person allowed it: what to ask.
    case ask(Question)
    /// Never served, whatever the person would say: why.
    case denied(Refusal)
}

extension AccessDecision {
    /// What the person is asked: who asks to do what to which item, whether the caller's file changed since the
    /// item trusted it, and whether Always allow may be offered.
    package struct Question: Sendable, Equatable {
        /// What the caller asks to do.
        package var kind: AccessKind
        /// Who asks: an identified application, or a caller that could not be identified.
        package var asker: Requester
        /// The item's label ("" when it has none, or when the question is about no item).
        package var label: String
        /// The label of the item's keychain ("" when the question is about no item).
        package var keychain: String
        /// The item trusts an application of this name, but its file is not the one trusted (an upgrade, or a
        /// replacement): the prompt says it CHANGED.
        package var changed: Bool
        /// Whether the prompt may offer Always allow, which adds the asker to the item's access list: only to
        /// read (trust to change an item would hand its secret over too), only to an identified application whose
        /// name a list can hold, never to a tool that runs whatever its command line says.
        package var offersAlways: Bool

        /// A question.
        package init(
            _ kind: AccessKind, asker: Requester, label: String = "", keychain: String = "", changed: Bool = false,
            offersAlways: Bool = false
        ) {
            self.kind = kind
            self.asker = asker
            self.label = label
            self.keychain = keychain
            self.changed = changed
            self.offersAlways = offersAlways
        }

        /// What the prompt warns of first: a changed file, an unidentified caller, a generic tool.
        package var warnings: [AccessWarning] {
            var warnings: [AccessWarning] = changed ? [.changed] : []
            switch asker {
            case .application(let application):
                switch application.genericTool {
                case .keychainCommand?: warnings.append(.keychainCommand)
                case .runsAnything?: warnings.append(.runsAnything)
                case nil: break
                }
            case .unidentified(let why):
                warnings.append(.unidentified(reason: why.description))
            }
            return warnings
        }
    }

    /// Why a caller is never served.
    package enum Refusal: Sendable, Equatable {
        /// A Flatpak application: it holds only what the portal gives it, and the action is the person's.
        case sandboxed(appID: String)
        /// A caller the daemon could not identify: there is no program to hold to it.
        case unidentified(UnidentifiedCaller)
    }
}

/// Who asks, as far as the daemon could tell (docs/threat-model.md, "Who is asking").
package enum Requester: Sendable, Equatable {
    /// Identified: its program.
    case application(Application)
    /// Could not be identified: why.
    case unidentified(UnidentifiedCaller)
}

/// Why a caller is not identified.
package enum UnidentifiedCaller: Sendable, Equatable, CustomStringConvertible {
    /// Its identification has not finished, or it never was asked for (the caller is unknown).
    case unknown
    /// Identifying it failed (gone, another user, `/proc` unreadable, a program too large to hash, …).
    case failed(CallerIdentityError)
    /// It was identified, but its process ended or executed another program since it connected (a child or
    /// another program holds the connection now).
    case changedSinceConnecting(pid: Int32)

    /// How a prompt's warning names the reason.
    package var description: String {
        switch self {
        case .unknown: "not identified"
        case .failed(let error): error.description
        case .changedSinceConnecting(let pid): "process \(pid) ended or started another program since it connected"
        }
    }
}

/// What a caller asks to do that is not a use of an item, and is the person's to decide or guesses a
/// password (docs/threat-model.md, "What one client can do to the others").
package enum CallerAction: Sendable, Equatable, CaseIterable {
    /// Hand the daemon the session's environment (`UpdateEnvironment`): where prompts show.
    case choosePromptDisplay
    /// Send a keychain's password (gnome-keyring's private interface, `Keychain1` unlock and password changes).
    case sendKeychainPassword
    /// Point a collection alias at another collection (`SetAlias`).
    case setCollectionAlias
    /// Change when a keychain locks by itself.
    case changeLockSettings
    /// Make a new collection (`CreateCollection`): asked of a sandboxed or unidentified caller, not refused.
    case createCollection
    /// Export a keychain's items with their secrets into a file (`Keychain1.Export`): the person is asked every
    /// time, and a sandboxed or unidentified caller is refused outright (docs/threat-model.md, "Export and import").
    case exportItems
    /// Import a file's items into a keychain (`Keychain1.Import`): asked every time, refused as ``exportItems``.
    case importItems

    /// The words an error message uses: "… cannot choose where prompts show".
    package var phrase: String {
        switch self {
        case .choosePromptDisplay: "choose where prompts show"
        case .sendKeychainPassword: "send a keychain password"
        case .setCollectionAlias: "set a collection alias"
        case .changeLockSettings: "change when a keychain locks"
        case .createCollection: "create a collection"
        case .exportItems: "export a keychain's items"
        case .importItems: "import items into a keychain"
        }
    }
}
