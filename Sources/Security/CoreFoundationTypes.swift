import Foundation

// The Core Foundation names Apple's keychain API is written in, mapped to
// what swift-corelibs-foundation offers on Linux, so that code such as
// `query as CFDictionary`, `var item: CFTypeRef?` and `kSecClass as String`
// compiles unchanged.

/// A result code (`OSStatus` in Apple's headers).
public typealias OSStatus = Int32
/// A string constant: `String` here, so `kSecClass as String` is the identity.
public typealias CFString = String
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

/// The boolean true, as Apple's `kCFBooleanTrue`.
public var kCFBooleanTrue: CFBoolean { NSNumber(value: true) }
/// The boolean false, as Apple's `kCFBooleanFalse`.
public var kCFBooleanFalse: CFBoolean { NSNumber(value: false) }
