import Pinentry

extension KeychainRegistry {
    /// Takes the desktop session's variables for the prompts shown from now on (a value sets, an empty value
    /// removes); refuses the whole change, changing nothing, when a name is not one prompts use or a value is
    /// unfit (``SessionEnvironment/apply(_:)``).
    package func updateSessionEnvironment(_ changes: [String: String]) throws(SessionEnvironmentError) {
        var updated = sessionEnvironment
        try updated.apply(changes)
        sessionEnvironment = updated
    }
}
