import CallerIdentity
import KeychainCore
import KeychainRegistry

extension AccessDecision.Question {
    /// The words of the prompt asking `questions` (one item for a read; for a change or deletion every item of
    /// one caller in one keychain, asked together), made on the prompt's thread (`dpkg -S` may take a while).
    package static func words(for questions: [Self]) -> @Sendable () -> AccessQuestion {
        let first = questions.first ?? Self(.read, asker: .unidentified(.unknown))
        let (kind, asker, keychain) = (first.kind, first.asker, first.keychain)
        let labels = questions.map(\.label)
        let offersAlways = questions.allSatisfy(\.offersAlways)
        var merged = first
        merged.changed = questions.contains(where: \.changed)
        let warnings = merged.warnings
        return {
            switch asker {
            case .application(let application):
                var who = application.description
                if let path = packagedPath(application), let package = PackageOwner.package(of: path) {
                    who += " (package \(package))"
                }
                return AccessQuestion(
                    kind, who: who, warnings: warnings, labels: labels, keychain: keychain, offersAlways: offersAlways)
            case .unidentified:
                return AccessQuestion(
                    kind, who: "A program Latchkey could not identify", warnings: warnings, labels: labels,
                    keychain: keychain, offersAlways: false)
            }
        }
    }

    /// The file whose package a prompt names: a script's, else the executable's; none for a Flatpak app, nor
    /// for a program in a container (the host's package database knows the host's files, not the container's).
    private static func packagedPath(_ application: Application) -> String? {
        switch application {
        case .executable(let path, _), .script(_, let path, _): path
        case .flatpak, .inContainer: nil
        }
    }
}

extension Requester {
    /// Whom a prompt about this requester takes its turn for (docs/robustness.md, "Fair prompts"): an identified
    /// application by its name, however many connections it opens (a Flatpak app by its app id), and every
    /// caller that could not be identified as one client, so that neither many connections nor hiding its
    /// identity gives a caller more turns.
    package var promptClient: PromptClient {
        switch self {
        case .application(let application):
            PromptClient(key: "application\t" + application.name, name: application.description)
        case .unidentified:
            PromptClient(key: "unidentified", name: "Programs Latchkey could not identify")
        }
    }
}

extension HeldKeychain {
    /// Adds `application` to the access list of the item at `reference` ("Always allow"), on disk; a failure
    /// is logged (the request was allowed once all the same).
    package func alwaysAllow(_ application: Application, item reference: ItemReference, label: String) {
        do throws(KeychainError) {
            var access = ItemAccess(attributes: try attributes(of: reference))
            access.trust(TrustedApplication(name: application.name, digest: application.digest?.description))
            let query = ItemQuery(reference.itemClass, synchronizable: .any, references: [reference])
            try keychain.update(matching: query, with: ItemChanges(attributes: access.attributes))
            touch()
        } catch {
            KeychainRegistry.log("cannot add \(application) to the access list of '\(label)': \(error.reason)")
        }
    }
}

extension AccessDecision.Refusal {
    /// The error message refusing `action`: "a Flatpak application (org.example.App) cannot set a collection
    /// alias".
    package func explanation(of action: CallerAction) -> String {
        switch self {
        case .sandboxed(let appID): "a Flatpak application (\(appID)) cannot \(action.phrase)"
        case .unidentified: "the caller could not be identified: it cannot \(action.phrase)"
        }
    }
}
