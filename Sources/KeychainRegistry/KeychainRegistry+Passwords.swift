import KeySlots
import KeychainCore
import KeychainStore
import Pinentry
import Posix

/// What the registry does with passwords for any keychain that opens with one: the pinentry ask, a prompt's
/// attempt, a password change, and a key from what was typed (the recovery key or the password). The login's
/// own uses of them are in `Login/`.
extension KeychainRegistry {
    /// Changes the password of `held` (which must open with a password) from `old` to `new`, under the
    /// wrong-password limit; the key is re-wrapped on the worker, saved on the serving thread, and the
    /// write-ahead log emptied of the old wrapped key on the worker, retried until it can be; `completion`
    /// runs once it is.
    ///
    /// A change a login asked for (`passwd` through pam_latchkey: PAM verified the old password) is never
    /// refused for earlier wrong passwords (`limited` false).
    package func changePassword(
        of held: HeldKeychain, from oldSecret: SharedSecret, to newSecret: SharedSecret, limited: Bool = true,
        completion: @escaping (LoginPasswordOutcome) -> Void
    ) {
        let wait = limited ? held.keychain.passwordRetryWait() : 0
        guard wait == 0 else { return completion(.notTried(waitSeconds: wait)) }
        let keychain = held.keychain
        offLoop(
            { Self.rewrap(keychain, from: oldSecret, to: newSecret, limited: limited) },
            then: { [self] result in
                let outcome = Self.commit(result, to: keychain)
                guard case .accepted = outcome else { return completion(outcome) }
                // The change is complete once no copy of the key wrapped under the old password is left in
                // the write-ahead log (or the file): a reader holding an older snapshot delays the reply.
                scheduleCheckpoint(keychain.path) { emptied in
                    guard emptied else {
                        return completion(
                            .failed(
                                KeychainError(
                                    .io,
                                    "the password was changed, but another process holds an older snapshot of the"
                                        + " keychain file, so the key wrapped under the old password is still on disk")
                            ))
                    }
                    completion(.accepted)
                }
            })
    }

    /// Re-wraps `keychain`'s key from the password `oldSecret` to `newSecret` (two key derivations: off the
    /// serving thread), under the wrong-password limit when `limited`: the change to commit, or why not. With
    /// ``commit(_:to:)``, the one re-key of a password there is: the daemon's (``changePassword(of:from:to:limited:completion:)``)
    /// and the one on the login keychain file with no daemon (``UserLogin/rekeyFile(inDirectory:from:to:limited:)``).
    static func rewrap(_ keychain: Keychain, from oldSecret: SharedSecret, to newSecret: SharedSecret, limited: Bool)
        -> Result<PasswordChange, KeychainError>
    {
        do throws(KeychainError) {
            return .success(
                try oldSecret.withUnsafeBytes { (old) throws(KeychainError) in
                    try newSecret.withUnsafeBytes { (new) throws(KeychainError) in
                        try keychain.rewrap(from: old, to: new, limited: limited)
                    }
                })
        } catch {
            return .failure(error)
        }
    }

    /// Saves what ``rewrap(_:from:to:limited:)`` gave into `keychain`: accepted, or why not (a wait under the
    /// wrong-password limit, or the error: `errSecAuthFailed` for a wrong old password).
    static func commit(_ rewrapped: Result<PasswordChange, KeychainError>, to keychain: Keychain)
        -> LoginPasswordOutcome
    {
        do throws(KeychainError) {
            try keychain.commit(try rewrapped.get())
        } catch {
            if let wait = error.retryAfterSeconds { return .notTried(waitSeconds: wait) }
            return .failed(error)
        }
        return .accepted
    }

    /// One password through pinentry (with `error` shown, if any), nil when not given. A pinentry that could
    /// not be started or failed says why in the log (the prompt then ends as dismissed, which is all the
    /// Secret Service's `Completed` can say).
    static func askOne(
        _ pinentry: Pinentry, _ request: PinentryRequest, _ error: String?, _ cancellation: PinentryCancellation
    ) -> [SharedSecret]? {
        var request = request
        request.error = error
        do throws(PinentryError) {
            guard case .password(let password) = try pinentry.askPassword(request, cancellation: cancellation) else {
                return nil
            }
            return [password]
        } catch {
            if !cancellation.isCancelled { log("no password prompt could be shown (“\(request.title)”): \(error)") }
            return nil
        }
    }

    /// A prompt's attempt (on the worker) that hands the answer's first password to `use`: what it returns, or
    /// its error.
    static func attempt<Accepted: Sendable>(
        _ use: @escaping @Sendable (UnsafeRawBufferPointer) throws(KeychainError) -> Accepted
    ) -> @Sendable ([SharedSecret]) -> Result<Accepted, KeychainError> {
        { answers in
            do throws(KeychainError) {
                return .success(try answers[0].withUnsafeBytes(use))
            } catch {
                return .failure(error)
            }
        }
    }

    /// A keychain's key from what was typed where its password is asked (the login keychain's, or one with a
    /// password of its own): its recovery key, when the text is one (the check group matches) and opens a
    /// recovery slot, else the password. `inPrompt`: typed by the person into the daemon's own prompt, so
    /// outside the programs' wrong-password count (neither refused for it nor counted: `PasswordAttempts`).
    static func unwrapKey(
        _ keychain: Keychain, typed: UnsafeRawBufferPointer, limited: Bool = true, inPrompt: Bool = false
    ) throws(KeychainError) -> UnwrappedKeychainKey {
        var text = [UInt8](typed)
        defer { wipeBytes(&text) }
        if var parsed = try? RecoveryKey(parsing: text) {
            parsed.wipe()
            if let key = try? RecoverySlot.unwrapKey(keychain, recoveryText: text) { return key }
        }
        return try keychain.unwrapKey(password: typed, limited: limited && !inPrompt, counted: !inPrompt)
    }
}
