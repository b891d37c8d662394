/// A result code of the keychain API, with the numeric value Apple's Security
/// framework gives the same condition (`OSStatus`).
public struct KeychainStatus: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The `OSStatus` number.
    public let rawValue: Int32

    /// Wraps an `OSStatus` number.
    public init(rawValue: Int32) {
        self.rawValue = rawValue
    }

    /// No error (`errSecSuccess`).
    public static let success = KeychainStatus(rawValue: 0)
    /// The operation is not implemented here (`errSecUnimplemented`).
    public static let unimplemented = KeychainStatus(rawValue: -4)
    /// The disk is full (`errSecDiskFull`).
    public static let diskFull = KeychainStatus(rawValue: -34)
    /// An I/O error (`errSecIO`).
    public static let io = KeychainStatus(rawValue: -36)
    /// A parameter was not valid (`errSecParam`).
    public static let param = KeychainStatus(rawValue: -50)
    /// Write permission denied (`errSecWrPerm`).
    public static let writePermission = KeychainStatus(rawValue: -61)
    /// Memory could not be allocated (`errSecAllocate`).
    public static let allocate = KeychainStatus(rawValue: -108)
    /// The user cancelled the operation (`errSecUserCanceled`).
    public static let userCanceled = KeychainStatus(rawValue: -128)
    /// A request was not valid (`errSecBadReq`).
    public static let badRequest = KeychainStatus(rawValue: -909)
    /// An internal component failed (`errSecInternalComponent`).
    public static let internalComponent = KeychainStatus(rawValue: -2070)
    /// No keychain is available (`errSecNotAvailable`).
    public static let notAvailable = KeychainStatus(rawValue: -25291)
    /// The keychain is read-only (`errSecReadOnly`).
    public static let readOnly = KeychainStatus(rawValue: -25292)
    /// The password was not correct (`errSecAuthFailed`).
    public static let authFailed = KeychainStatus(rawValue: -25293)
    /// The keychain does not exist (`errSecNoSuchKeychain`).
    public static let noSuchKeychain = KeychainStatus(rawValue: -25294)
    /// The keychain file is not valid (`errSecInvalidKeychain`).
    public static let invalidKeychain = KeychainStatus(rawValue: -25295)
    /// A keychain with that name already exists (`errSecDuplicateKeychain`).
    public static let duplicateKeychain = KeychainStatus(rawValue: -25296)
    /// An item with the same primary key already exists (`errSecDuplicateItem`).
    public static let duplicateItem = KeychainStatus(rawValue: -25299)
    /// No item matched (`errSecItemNotFound`).
    public static let itemNotFound = KeychainStatus(rawValue: -25300)
    /// The data is too large (`errSecDataTooLarge`).
    public static let dataTooLarge = KeychainStatus(rawValue: -25302)
    /// The attribute does not belong to the item class (`errSecNoSuchAttr`).
    public static let noSuchAttribute = KeychainStatus(rawValue: -25303)
    /// An item reference is not valid (`errSecInvalidItemRef`).
    public static let invalidItemReference = KeychainStatus(rawValue: -25304)
    /// The item class is not known (`errSecNoSuchClass`).
    public static let noSuchClass = KeychainStatus(rawValue: -25306)
    /// No default keychain is set (`errSecNoDefaultKeychain`).
    public static let noDefaultKeychain = KeychainStatus(rawValue: -25307)
    /// The keychain is locked and no prompt may be shown (`errSecInteractionNotAllowed`).
    public static let interactionNotAllowed = KeychainStatus(rawValue: -25308)
    /// The attribute is read-only (`errSecReadOnlyAttr`).
    public static let readOnlyAttribute = KeychainStatus(rawValue: -25309)
    /// A prompt is needed for this operation (`errSecInteractionRequired`).
    public static let interactionRequired = KeychainStatus(rawValue: -25315)
    /// The data cannot be read back: damaged or tampered with (`errSecDecode`).
    public static let decode = KeychainStatus(rawValue: -26275)

    /// A one-sentence explanation, the equivalent of `SecCopyErrorMessageString`.
    public var message: String {
        Self.messages[rawValue] ?? "Unknown keychain status \(rawValue)."
    }

    /// Whether this is one of the statuses above, which the keychain returns.
    public var isKnown: Bool { Self.messages[rawValue] != nil }

    /// The status name and number, e.g. `errSecParam (-50)`.
    public var description: String {
        "\(Self.names[rawValue] ?? "OSStatus") (\(rawValue))"
    }

    private static let names: [Int32: String] = [
        0: "errSecSuccess", -4: "errSecUnimplemented", -34: "errSecDiskFull", -36: "errSecIO",
        -50: "errSecParam", -61: "errSecWrPerm", -108: "errSecAllocate",
        -128: "errSecUserCanceled", -909: "errSecBadReq", -2070: "errSecInternalComponent",
        -25291: "errSecNotAvailable", -25292: "errSecReadOnly", -25293: "errSecAuthFailed",
        -25294: "errSecNoSuchKeychain", -25295: "errSecInvalidKeychain",
        -25296: "errSecDuplicateKeychain", -25299: "errSecDuplicateItem",
        -25300: "errSecItemNotFound", -25302: "errSecDataTooLarge",
        -25303: "errSecNoSuchAttr", -25304: "errSecInvalidItemRef",
        -25306: "errSecNoSuchClass", -25307: "errSecNoDefaultKeychain",
        -25308: "errSecInteractionNotAllowed", -25309: "errSecReadOnlyAttr",
        -25315: "errSecInteractionRequired", -26275: "errSecDecode",
    ]

    private static let messages: [Int32: String] = [
        0: "No error.",
        -4: "This operation is not implemented.",
        -34: "There is no space left on the disk holding the keychain.",
        -36: "An input/output error occurred while using the keychain file.",
        -50: "A parameter passed to the function was not valid.",
        -61: "Write permission to the keychain was refused.",
        -108: "Memory could not be allocated.",
        -128: "The user cancelled the operation.",
        -909: "The request was not valid.",
        -2070: "An internal component of the keychain failed.",
        -25291: "No keychain is available.",
        -25292: "The keychain cannot be changed: it is read-only.",
        -25293: "The password given for the keychain is not correct.",
        -25294: "The keychain does not exist.",
        -25295: "The file is not a valid keychain.",
        -25296: "A keychain already exists at that place.",
        -25299: "An item with these primary attributes already exists in the keychain.",
        -25300: "No item in the keychain matches the query.",
        -25302: "The data is too large for the keychain.",
        -25303: "The attribute does not exist for this class of item.",
        -25304: "The item reference is not valid.",
        -25306: "The item class is not one the keychain knows.",
        -25307: "No default keychain is set.",
        -25308: "The keychain is locked and no user interaction is allowed to unlock it.",
        -25309: "The attribute is read-only.",
        -25315: "User interaction is required to complete this operation.",
        -26275: "The stored data could not be decoded: it is damaged or was tampered with.",
    ]
}

/// A failed keychain operation: a ``KeychainStatus`` and what exactly went wrong.
public struct KeychainError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The status the Apple API would return.
    public let status: KeychainStatus
    /// A one-line explanation naming the offending key or value.
    public let reason: String
    /// Set when a password was refused without being tried, after too many wrong ones: the seconds to wait.
    public private(set) var retryAfterSeconds: Int64?

    /// An error with a status and a specific reason.
    public init(_ status: KeychainStatus, _ reason: String) {
        self.status = status
        self.reason = reason
    }

    /// `errSecAuthFailed` for a password not tried because too many wrong ones came lately.
    public static func tooManyAttempts(waitSeconds: Int64) -> KeychainError {
        var error = KeychainError(.authFailed, "too many wrong passwords; not tried (wait \(waitSeconds) s)")
        error.retryAfterSeconds = waitSeconds
        return error
    }

    /// `errSecParam` with a reason.
    public static func param(_ reason: String) -> KeychainError {
        KeychainError(.param, reason)
    }

    /// The reason and status in one line.
    public var description: String {
        "\(reason) [\(status)]"
    }
}
