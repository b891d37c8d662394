import KeychainCore

/// No error.
public let errSecSuccess: OSStatus = KeychainStatus.success.rawValue
/// Function or operation not implemented.
public let errSecUnimplemented: OSStatus = KeychainStatus.unimplemented.rawValue
/// The disk is full.
public let errSecDiskFull: OSStatus = KeychainStatus.diskFull.rawValue
/// An I/O error.
public let errSecIO: OSStatus = KeychainStatus.io.rawValue
/// One or more parameters were not valid.
public let errSecParam: OSStatus = KeychainStatus.param.rawValue
/// Write permission denied.
public let errSecWrPerm: OSStatus = KeychainStatus.writePermission.rawValue
/// Memory could not be allocated.
public let errSecAllocate: OSStatus = KeychainStatus.allocate.rawValue
/// The user cancelled the operation.
public let errSecUserCanceled: OSStatus = KeychainStatus.userCanceled.rawValue
/// A bad request.
public let errSecBadReq: OSStatus = KeychainStatus.badRequest.rawValue
/// An internal component failed.
public let errSecInternalComponent: OSStatus = KeychainStatus.internalComponent.rawValue
/// No keychain is available.
public let errSecNotAvailable: OSStatus = KeychainStatus.notAvailable.rawValue
/// The keychain is read-only.
public let errSecReadOnly: OSStatus = KeychainStatus.readOnly.rawValue
/// The password was not correct.
public let errSecAuthFailed: OSStatus = KeychainStatus.authFailed.rawValue
/// The keychain does not exist.
public let errSecNoSuchKeychain: OSStatus = KeychainStatus.noSuchKeychain.rawValue
/// The keychain is not valid.
public let errSecInvalidKeychain: OSStatus = KeychainStatus.invalidKeychain.rawValue
/// A keychain already exists there.
public let errSecDuplicateKeychain: OSStatus = KeychainStatus.duplicateKeychain.rawValue
/// The item already exists.
public let errSecDuplicateItem: OSStatus = KeychainStatus.duplicateItem.rawValue
/// The item could not be found.
public let errSecItemNotFound: OSStatus = KeychainStatus.itemNotFound.rawValue
/// The data is too large.
public let errSecDataTooLarge: OSStatus = KeychainStatus.dataTooLarge.rawValue
/// The attribute does not exist for the item class.
public let errSecNoSuchAttr: OSStatus = KeychainStatus.noSuchAttribute.rawValue
/// The item reference is not valid.
public let errSecInvalidItemRef: OSStatus = KeychainStatus.invalidItemReference.rawValue
/// The item class does not exist.
public let errSecNoSuchClass: OSStatus = KeychainStatus.noSuchClass.rawValue
/// No default keychain.
public let errSecNoDefaultKeychain: OSStatus = KeychainStatus.noDefaultKeychain.rawValue
/// User interaction is not allowed (the keychain is locked).
public let errSecInteractionNotAllowed: OSStatus = KeychainStatus.interactionNotAllowed.rawValue
/// The attribute is read-only.
public let errSecReadOnlyAttr: OSStatus = KeychainStatus.readOnlyAttribute.rawValue
/// User interaction is required.
public let errSecInteractionRequired: OSStatus = KeychainStatus.interactionRequired.rawValue
/// The data could not be decoded.
public let errSecDecode: OSStatus = KeychainStatus.decode.rawValue

/// A sentence that explains a result code (Apple's `SecCopyErrorMessageString`).
///
/// - Parameter reserved: pass nil.
public func SecCopyErrorMessageString(_ status: OSStatus, _ reserved: UnsafeMutableRawPointer?) -> CFString? {
    KeychainStatus(rawValue: status).message
}

/// Runs a keychain operation and turns its outcome into the `OSStatus` Apple's API returns.
func osStatus(_ body: () throws(KeychainError) -> Void) -> OSStatus {
    do {
        try body()
        return errSecSuccess
    } catch {
        return error.status.rawValue
    }
}
