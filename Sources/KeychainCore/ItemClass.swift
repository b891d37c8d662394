/// The class of a keychain item (`kSecClass` values).
public enum ItemClass: String, CaseIterable, Hashable, Sendable {
    /// `kSecClassGenericPassword`.
    case genericPassword = "genp"
    /// `kSecClassInternetPassword`.
    case internetPassword = "inet"
    /// `kSecClassCertificate`.
    case certificate = "cert"
    /// `kSecClassKey`.
    case key = "keys"
    /// `kSecClassIdentity`.
    case identity = "idnt"
}

extension ItemClass {
    /// Generic and Internet passwords: the classes the Secret Service shows.
    public var isPassword: Bool { self == .genericPassword || self == .internetPassword }
}
