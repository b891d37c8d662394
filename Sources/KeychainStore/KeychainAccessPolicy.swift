import FoundationEssentials
import KeychainCore

extension Keychain {
    private static let accessPolicyName = "access-policy"

    /// Whether the keychain asks before handing a secret to an application its item does not trust;
    /// ``KeychainAccessPolicy/prompt`` when none was stored (new keychains, and those made before there was a
    /// choice).
    public func accessPolicy() throws(KeychainError) -> KeychainAccessPolicy {
        guard let stored = try metadata(Self.accessPolicyName) else { return .prompt }
        guard let policy = KeychainAccessPolicy(rawValue: String(decoding: stored, as: UTF8.self)) else {
            throw KeychainError(.decode, "the keychain's access policy is not one this version knows")
        }
        return policy
    }

    /// Stores the keychain's access policy.
    public func setAccessPolicy(_ policy: KeychainAccessPolicy) throws(KeychainError) {
        try setMetadata(Self.accessPolicyName, Data(policy.rawValue.utf8))
    }
}
