/// A credential of an imported file that no keychain item can hold (a passkey, a TOTP seed of an unknown
/// algorithm…), listed with why it was left out: what the file readers (CredentialExchange) report and what an
/// import's summary (`Keychain1.Import`'s reply, `latchkey import --json`) carries, one type for both.
package struct SkippedCredential: Equatable, Sendable {
    /// The title of the item it belongs to.
    package var title: String
    /// Its type as the file names it (`passkey`, `ssh-key`, …).
    package var credentialType: String
    /// Why it was left out, one line.
    package var reason: String

    /// A credential of `credentialType` in the item `title`, left out for `reason`.
    package init(title: String, credentialType: String, reason: String) {
        self.title = title
        self.credentialType = credentialType
        self.reason = reason
    }
}
