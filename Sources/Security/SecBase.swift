import Foundation
import KeychainCore

/// A sentence that explains a result code (Apple's `SecCopyErrorMessageString`).
///
/// - Parameter reserved: pass nil.
public func SecCopyErrorMessageString(_ status: OSStatus, _ reserved: UnsafeMutableRawPointer?) -> CFString? {
    let keychainStatus = KeychainStatus(rawValue: status)
    let message = keychainStatus.isKnown ? keychainStatus.message : secBaseMessages[status] ?? keychainStatus.message
    return NSString(string: message)
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
