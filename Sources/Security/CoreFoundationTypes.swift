import Foundation

// The Core Foundation names Apple's keychain API is written in, mapped to
// what swift-corelibs-foundation offers on Linux, so that code such as
// `query as CFDictionary`, `var item: CFTypeRef?`, `kSecClass as String` and
// `[kSecClass: kSecClassGenericPassword] as CFDictionary` compiles unchanged.
//
// On Apple systems the CF types are toll-free bridged to their Foundation
// classes; here they are those classes, so the same `as` conversions hold.

/// A result code (`OSStatus` in Apple's headers).
public typealias OSStatus = Int32
/// A string object (Apple's `CFString`, toll-free bridged to `NSString`): a
/// class, so `kSec*` constants are `AnyObject`s, and `as String` bridges it.
public typealias CFString = NSString
/// A dictionary passed to or returned from the keychain API.
public typealias CFDictionary = NSDictionary
/// An array returned from the keychain API.
public typealias CFArray = NSArray
/// Bytes returned from the keychain API.
public typealias CFData = NSData
/// A number in a keychain dictionary.
public typealias CFNumber = NSNumber
/// A boolean in a keychain dictionary.
public typealias CFBoolean = NSNumber
/// A date in a keychain dictionary.
public typealias CFDate = NSDate
/// Any object the keychain API returns.
public typealias CFTypeRef = AnyObject
/// A signed count or index (`long` on Apple's 64-bit systems).
public typealias CFIndex = Int
/// Option bits (`unsigned long` on Apple's 64-bit systems).
public typealias CFOptionFlags = UInt
/// An error object (Apple's `CFError`, toll-free bridged to `NSError`).
public typealias CFError = NSError
/// The domain of a `CFError`.
public typealias CFErrorDomain = CFString

/// The boolean true, as Apple's `kCFBooleanTrue` (an implicitly unwrapped
/// optional there too, so code writes `kCFBooleanTrue!` or stores it in `Any`).
public let kCFBooleanTrue: CFBoolean! = NSNumber(value: true)
/// The boolean false, as Apple's `kCFBooleanFalse`.
public let kCFBooleanFalse: CFBoolean! = NSNumber(value: false)

/// A memory allocator (Apple's `CFAllocatorRef`). Swift manages memory here;
/// the type exists so that calls which pass an allocator compile.
public final class CFAllocator: Sendable {
    private init() {}
}

/// The default allocator: nil, as Apple's `kCFAllocatorDefault` (`NULL`) is.
public let kCFAllocatorDefault: CFAllocator! = nil

/// The domain of an error, as Apple's `CFErrorGetDomain`.
public func CFErrorGetDomain(_ err: CFError!) -> CFErrorDomain! {
    err.map { NSString(string: $0.domain) }
}

/// The code of an error, as Apple's `CFErrorGetCode`.
public func CFErrorGetCode(_ err: CFError!) -> CFIndex {
    err?.code ?? 0
}

/// A copy of an error's user-info dictionary, as Apple's `CFErrorCopyUserInfo`
/// (an empty dictionary when the error has none).
public func CFErrorCopyUserInfo(_ err: CFError!) -> CFDictionary! {
    NSDictionary(dictionary: err?.userInfo ?? [:])
}

/// The error domain of `OSStatus` codes (Foundation's `NSOSStatusErrorDomain`).
let osStatusErrorDomain = "NSOSStatusErrorDomain"

/// Stores an error for an Apple-style `CFError` out parameter, retained as a
/// `Create`-rule function hands it over (the caller takes it with
/// `takeRetainedValue()`; `takeUnretainedValue()` only leaks it).
func report(_ status: OSStatus, _ reason: String, to error: UnsafeMutablePointer<Unmanaged<CFError>?>?) {
    guard let error else { return }
    let object = NSError(
        domain: osStatusErrorDomain, code: Int(status), userInfo: [NSLocalizedDescriptionKey: reason])
    error.pointee = Unmanaged.passRetained(object)
}

// swift-format-ignore: AvoidRetroactiveConformances
// (Retroactive on purpose: the conformance Foundation gives NSString on Apple systems.)
/// A `CFString` in an `AnyHashable` is its `String`, as on Apple systems, where Foundation gives `NSString` this
/// representation: `AnyHashable(kSecAttrAccount) == AnyHashable("acct")`, with equal hashes. So a
/// `[AnyHashable: Any]` result is read with `kSecAttrAccount` or with `kSecAttrAccount as String` alike, and
/// `NSDictionary.isEqual(to:)` (which boxes both sides' values in `AnyHashable`) finds `kSecClassGenericPassword`
/// equal to the `"genp"` a bridged dictionary holds. corelibs Foundation leaves `NSString` without it (an
/// `NSString` and a `String` of the same text are unequal `AnyHashable`s); since a `CFString` is an `NSString`
/// here, the conformance holds for every `NSString` in a process that links this module, as it does on Apple systems.
extension NSString: @retroactive _HasCustomAnyHashableRepresentation {
    /// The string's `String`, boxed.
    public func _toCustomAnyHashable() -> AnyHashable? {
        AnyHashable(String(self))
    }
}

// swift-format-ignore: AvoidRetroactiveConformances
// (Retroactive on purpose: the conformance Foundation gives NSNumber on Apple systems.)
/// A `CFNumber` or `CFBoolean` in an `AnyHashable` is its Swift value, as on Apple systems: `kCFBooleanTrue` is
/// `true` (`AnyHashable(kCFBooleanTrue!) == AnyHashable(true)`), any other number the widest integer or `Double`
/// that holds it exactly, with the hash of that value, so `NSNumber(value: 443)` finds the key `443` of a
/// `[AnyHashable: Any]`. corelibs Foundation gives `NSNumber` none: there a boolean is unequal to `true`, and a
/// number equal to an integer hashes differently from it (so a dictionary lookup misses).
extension NSNumber: @retroactive _HasCustomAnyHashableRepresentation {
    /// The number's Swift value, boxed: `Bool` for the two boolean objects, else `Decimal`, `Int64`, `UInt64`
    /// or `Double`, the first that holds it exactly.
    public func _toCustomAnyHashable() -> AnyHashable? {
        // corelibs makes every boolean NSNumber one of two objects, kCFBooleanTrue and kCFBooleanFalse.
        if self === kCFBooleanTrue { return AnyHashable(true) }
        if self === kCFBooleanFalse { return AnyHashable(false) }
        if let decimal = self as? NSDecimalNumber { return AnyHashable(decimal.decimalValue) }
        let signed = int64Value
        if NSNumber(value: signed) == self { return AnyHashable(signed) }
        let unsigned = uint64Value
        if NSNumber(value: unsigned) == self { return AnyHashable(unsigned) }
        return AnyHashable(doubleValue)
    }
}

extension NSString {
    /// Lets a `switch` over a `String` name `kSec*` constants in its cases.
    static func ~= (pattern: NSString, value: String) -> Bool {
        pattern.isEqual(to: value)
    }
}
