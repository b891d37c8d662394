// The result codes of Apple's SecBase.h, with Apple's names and values, so
// code that compares or switches on them compiles and means the same here.
// Latchkey's keychain calls return only the keychain codes among them (see
// KeychainStatus); the others exist for code written against Apple's list.
// Generated from a table of names, values and sentences; keep it in step with SecBase.h.

/// No error (Apple's `noErr`, from MacTypes.h).
public let noErr: OSStatus = 0

/// No error.
public let errSecSuccess: OSStatus = 0
/// Function or operation not implemented.
public let errSecUnimplemented: OSStatus = -4
/// The disk is full.
public let errSecDiskFull: OSStatus = -34
/// The disk is full (an older spelling of errSecDiskFull).
public let errSecDskFull: OSStatus = -34
/// An input/output error.
public let errSecIO: OSStatus = -36
/// A file is already open with write permission.
public let errSecOpWr: OSStatus = -49
/// One or more parameters passed to a function were not valid.
public let errSecParam: OSStatus = -50
/// Write permission denied.
public let errSecWrPerm: OSStatus = -61
/// Memory could not be allocated.
public let errSecAllocate: OSStatus = -108
/// The user cancelled the operation.
public let errSecUserCanceled: OSStatus = -128
/// A bad parameter or an invalid state for the operation.
public let errSecBadReq: OSStatus = -909
/// An internal component failed.
public let errSecInternalComponent: OSStatus = -2070
/// An unknown Core Foundation error.
public let errSecCoreFoundationUnknown: OSStatus = -4960
/// A required entitlement is missing (Apple's code signing; Latchkey has no entitlements and never returns it).
public let errSecMissingEntitlement: OSStatus = -34018
/// The client is restricted from this API.
public let errSecRestrictedAPI: OSStatus = -34020
/// No keychain is available.
public let errSecNotAvailable: OSStatus = -25291
/// The keychain is read-only.
public let errSecReadOnly: OSStatus = -25292
/// The user name or passphrase was not correct.
public let errSecAuthFailed: OSStatus = -25293
/// The keychain does not exist.
public let errSecNoSuchKeychain: OSStatus = -25294
/// The keychain is not valid.
public let errSecInvalidKeychain: OSStatus = -25295
/// A keychain with the same name already exists.
public let errSecDuplicateKeychain: OSStatus = -25296
/// The callback is already registered.
public let errSecDuplicateCallback: OSStatus = -25297
/// The callback is not valid.
public let errSecInvalidCallback: OSStatus = -25298
/// The item already exists.
public let errSecDuplicateItem: OSStatus = -25299
/// The item could not be found.
public let errSecItemNotFound: OSStatus = -25300
/// The buffer is too small.
public let errSecBufferTooSmall: OSStatus = -25301
/// The data is too large.
public let errSecDataTooLarge: OSStatus = -25302
/// The attribute does not exist.
public let errSecNoSuchAttr: OSStatus = -25303
/// The item reference is not valid.
public let errSecInvalidItemRef: OSStatus = -25304
/// The search reference is not valid.
public let errSecInvalidSearchRef: OSStatus = -25305
/// The keychain item class does not exist.
public let errSecNoSuchClass: OSStatus = -25306
/// No default keychain.
public let errSecNoDefaultKeychain: OSStatus = -25307
/// User interaction is not allowed.
public let errSecInteractionNotAllowed: OSStatus = -25308
/// The attribute is read-only.
public let errSecReadOnlyAttr: OSStatus = -25309
/// The version is incorrect.
public let errSecWrongSecVersion: OSStatus = -25310
/// The key size is not allowed.
public let errSecKeySizeNotAllowed: OSStatus = -25311
/// No storage module is available.
public let errSecNoStorageModule: OSStatus = -25312
/// No certificate module is available.
public let errSecNoCertificateModule: OSStatus = -25313
/// No policy module is available.
public let errSecNoPolicyModule: OSStatus = -25314
/// User interaction is required.
public let errSecInteractionRequired: OSStatus = -25315
/// The data is not available.
public let errSecDataNotAvailable: OSStatus = -25316
/// The data cannot be modified.
public let errSecDataNotModifiable: OSStatus = -25317
/// A certificate chain could not be created.
public let errSecCreateChainFailed: OSStatus = -25318
/// The preference domain is not valid.
public let errSecInvalidPrefsDomain: OSStatus = -25319
/// The user interface cannot be shown in dark wake.
public let errSecInDarkWake: OSStatus = -25320
/// The access control list is not in simple form.
public let errSecACLNotSimple: OSStatus = -25240
/// The policy could not be found.
public let errSecPolicyNotFound: OSStatus = -25241
/// The trust setting is not valid.
public let errSecInvalidTrustSetting: OSStatus = -25242
/// The item has no access control.
public let errSecNoAccessForItem: OSStatus = -25243
/// The owner edit is not valid.
public let errSecInvalidOwnerEdit: OSStatus = -25244
/// No trust results are available.
public let errSecTrustNotAvailable: OSStatus = -25245
/// The import or export format is not supported.
public let errSecUnsupportedFormat: OSStatus = -25256
/// The item's format is not known.
public let errSecUnknownFormat: OSStatus = -25257
/// The key must be wrapped to be exported.
public let errSecKeyIsSensitive: OSStatus = -25258
/// An attempt was made to import multiple private keys.
public let errSecMultiplePrivKeys: OSStatus = -25259
/// A passphrase is required for import or export.
public let errSecPassphraseRequired: OSStatus = -25260
/// The password reference is not valid.
public let errSecInvalidPasswordRef: OSStatus = -25261
/// The trust settings are not valid.
public let errSecInvalidTrustSettings: OSStatus = -25262
/// No trust settings were found.
public let errSecNoTrustSettings: OSStatus = -25263
/// The MAC of a PKCS12 blob failed verification.
public let errSecPkcs12VerifyFailure: OSStatus = -25264
/// The certificate is not valid.
public let errSecInvalidCertificate: OSStatus = -26265
/// The certificate was not signed by its proposed parent.
public let errSecNotSigner: OSStatus = -26267
/// The certificate chain was not trusted: a policy did not accept it.
public let errSecPolicyDenied: OSStatus = -26270
/// The data could not be decoded.
public let errSecDecode: OSStatus = -26275
/// Service not available (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecServiceNotAvailable: OSStatus = -67585
/// Insufficient client ID (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInsufficientClientID: OSStatus = -67586
/// Device reset (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecDeviceReset: OSStatus = -67587
/// Device failed (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecDeviceFailed: OSStatus = -67588
/// Apple add app ACL subject (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecAppleAddAppACLSubject: OSStatus = -67589
/// Apple public key incomplete (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecApplePublicKeyIncomplete: OSStatus = -67590
/// Apple signature mismatch (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecAppleSignatureMismatch: OSStatus = -67591
/// Apple invalid key start date (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecAppleInvalidKeyStartDate: OSStatus = -67592
/// Apple invalid key end date (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecAppleInvalidKeyEndDate: OSStatus = -67593
/// Conversion error (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecConversionError: OSStatus = -67594
/// Apple SSLv2 rollback (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecAppleSSLv2Rollback: OSStatus = -67595
/// Quota exceeded (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecQuotaExceeded: OSStatus = -67596
/// File too big (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecFileTooBig: OSStatus = -67597
/// Invalid database blob (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidDatabaseBlob: OSStatus = -67598
/// Invalid key blob (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidKeyBlob: OSStatus = -67599
/// Incompatible database blob (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecIncompatibleDatabaseBlob: OSStatus = -67600
/// Incompatible key blob (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecIncompatibleKeyBlob: OSStatus = -67601
/// Host name mismatch (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecHostNameMismatch: OSStatus = -67602
/// Unknown critical extension flag (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecUnknownCriticalExtensionFlag: OSStatus = -67603
/// No basic constraints (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecNoBasicConstraints: OSStatus = -67604
/// No basic constraints CA (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecNoBasicConstraintsCA: OSStatus = -67605
/// Invalid authority key ID (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidAuthorityKeyID: OSStatus = -67606
/// Invalid subject key ID (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidSubjectKeyID: OSStatus = -67607
/// Invalid key usage for policy (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidKeyUsageForPolicy: OSStatus = -67608
/// Invalid extended key usage (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidExtendedKeyUsage: OSStatus = -67609
/// Invalid ID linkage (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidIDLinkage: OSStatus = -67610
/// Path length constraint exceeded (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecPathLengthConstraintExceeded: OSStatus = -67611
/// Invalid root (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidRoot: OSStatus = -67612
/// CRL expired (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecCRLExpired: OSStatus = -67613
/// CRL not valid yet (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecCRLNotValidYet: OSStatus = -67614
/// CRL not found (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecCRLNotFound: OSStatus = -67615
/// CRL server down (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecCRLServerDown: OSStatus = -67616
/// CRL bad URI (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecCRLBadURI: OSStatus = -67617
/// Unknown cert extension (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecUnknownCertExtension: OSStatus = -67618
/// Unknown CRL extension (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecUnknownCRLExtension: OSStatus = -67619
/// CRL not trusted (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecCRLNotTrusted: OSStatus = -67620
/// CRL policy failed (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecCRLPolicyFailed: OSStatus = -67621
/// IDP failure (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecIDPFailure: OSStatus = -67622
/// SMIME email addresses not found (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecSMIMEEmailAddressesNotFound: OSStatus = -67623
/// SMIME bad extended key usage (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecSMIMEBadExtendedKeyUsage: OSStatus = -67624
/// SMIME bad key usage (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecSMIMEBadKeyUsage: OSStatus = -67625
/// SMIME key usage not critical (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecSMIMEKeyUsageNotCritical: OSStatus = -67626
/// SMIME no email address (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecSMIMENoEmailAddress: OSStatus = -67627
/// SMIME subj alt name not critical (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecSMIMESubjAltNameNotCritical: OSStatus = -67628
/// SSL bad extended key usage (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecSSLBadExtendedKeyUsage: OSStatus = -67629
/// OCSP bad response (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecOCSPBadResponse: OSStatus = -67630
/// OCSP bad request (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecOCSPBadRequest: OSStatus = -67631
/// OCSP unavailable (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecOCSPUnavailable: OSStatus = -67632
/// OCSP status unrecognized (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecOCSPStatusUnrecognized: OSStatus = -67633
/// End of data (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecEndOfData: OSStatus = -67634
/// Incomplete cert revocation check (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecIncompleteCertRevocationCheck: OSStatus = -67635
/// Network failure (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecNetworkFailure: OSStatus = -67636
/// OCSP not trusted to anchor (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecOCSPNotTrustedToAnchor: OSStatus = -67637
/// Record modified (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecRecordModified: OSStatus = -67638
/// OCSP signature error (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecOCSPSignatureError: OSStatus = -67639
/// OCSP no signer (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecOCSPNoSigner: OSStatus = -67640
/// OCSP responder malformed req (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecOCSPResponderMalformedReq: OSStatus = -67641
/// OCSP responder internal error (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecOCSPResponderInternalError: OSStatus = -67642
/// OCSP responder try later (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecOCSPResponderTryLater: OSStatus = -67643
/// OCSP responder signature required (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecOCSPResponderSignatureRequired: OSStatus = -67644
/// OCSP responder unauthorized (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecOCSPResponderUnauthorized: OSStatus = -67645
/// OCSP response nonce mismatch (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecOCSPResponseNonceMismatch: OSStatus = -67646
/// Code signing bad cert chain length (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecCodeSigningBadCertChainLength: OSStatus = -67647
/// Code signing no basic constraints (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecCodeSigningNoBasicConstraints: OSStatus = -67648
/// Code signing bad path length constraint (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecCodeSigningBadPathLengthConstraint: OSStatus = -67649
/// Code signing no extended key usage (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecCodeSigningNoExtendedKeyUsage: OSStatus = -67650
/// Code signing development (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecCodeSigningDevelopment: OSStatus = -67651
/// Resource sign bad cert chain length (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecResourceSignBadCertChainLength: OSStatus = -67652
/// Resource sign bad ext key usage (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecResourceSignBadExtKeyUsage: OSStatus = -67653
/// Trust setting deny (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecTrustSettingDeny: OSStatus = -67654
/// Invalid subject name (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidSubjectName: OSStatus = -67655
/// Unknown qualified cert statement (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecUnknownQualifiedCertStatement: OSStatus = -67656
/// MobileMe request queued (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecMobileMeRequestQueued: OSStatus = -67657
/// MobileMe request redirected (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecMobileMeRequestRedirected: OSStatus = -67658
/// MobileMe server error (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecMobileMeServerError: OSStatus = -67659
/// MobileMe server not available (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecMobileMeServerNotAvailable: OSStatus = -67660
/// MobileMe server already exists (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecMobileMeServerAlreadyExists: OSStatus = -67661
/// MobileMe server service err (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecMobileMeServerServiceErr: OSStatus = -67662
/// MobileMe request already pending (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecMobileMeRequestAlreadyPending: OSStatus = -67663
/// MobileMe no request pending (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecMobileMeNoRequestPending: OSStatus = -67664
/// MobileMe CSR verify failure (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecMobileMeCSRVerifyFailure: OSStatus = -67665
/// MobileMe failed consistency check (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecMobileMeFailedConsistencyCheck: OSStatus = -67666
/// Not initialized (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecNotInitialized: OSStatus = -67667
/// Invalid handle usage (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidHandleUsage: OSStatus = -67668
/// PVC referent not found (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecPVCReferentNotFound: OSStatus = -67669
/// Function integrity fail (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecFunctionIntegrityFail: OSStatus = -67670
/// Internal error (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInternalError: OSStatus = -67671
/// Memory error (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecMemoryError: OSStatus = -67672
/// Invalid data (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidData: OSStatus = -67673
/// MDS error (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecMDSError: OSStatus = -67674
/// Invalid pointer (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidPointer: OSStatus = -67675
/// Self check failed (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecSelfCheckFailed: OSStatus = -67676
/// Function failed (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecFunctionFailed: OSStatus = -67677
/// Module manifest verify failed (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecModuleManifestVerifyFailed: OSStatus = -67678
/// Invalid GUID (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidGUID: OSStatus = -67679
/// Invalid handle (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidHandle: OSStatus = -67680
/// Invalid DB list (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidDBList: OSStatus = -67681
/// Invalid passthrough ID (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidPassthroughID: OSStatus = -67682
/// Invalid network address (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidNetworkAddress: OSStatus = -67683
/// CRL already signed (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecCRLAlreadySigned: OSStatus = -67684
/// Invalid number of fields (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidNumberOfFields: OSStatus = -67685
/// Verification failure (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecVerificationFailure: OSStatus = -67686
/// Unknown tag (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecUnknownTag: OSStatus = -67687
/// Invalid signature (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidSignature: OSStatus = -67688
/// Invalid name (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidName: OSStatus = -67689
/// Invalid certificate ref (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidCertificateRef: OSStatus = -67690
/// Invalid certificate group (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidCertificateGroup: OSStatus = -67691
/// Tag not found (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecTagNotFound: OSStatus = -67692
/// Invalid query (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidQuery: OSStatus = -67693
/// Invalid value (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidValue: OSStatus = -67694
/// Callback failed (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecCallbackFailed: OSStatus = -67695
/// ACL delete failed (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecACLDeleteFailed: OSStatus = -67696
/// ACL replace failed (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecACLReplaceFailed: OSStatus = -67697
/// ACL add failed (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecACLAddFailed: OSStatus = -67698
/// ACL change failed (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecACLChangeFailed: OSStatus = -67699
/// Invalid access credentials (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidAccessCredentials: OSStatus = -67700
/// Invalid record (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidRecord: OSStatus = -67701
/// Invalid ACL (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidACL: OSStatus = -67702
/// Invalid sample value (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidSampleValue: OSStatus = -67703
/// Incompatible version (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecIncompatibleVersion: OSStatus = -67704
/// Privilege not granted (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecPrivilegeNotGranted: OSStatus = -67705
/// Invalid scope (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidScope: OSStatus = -67706
/// PVC already configured (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecPVCAlreadyConfigured: OSStatus = -67707
/// Invalid PVC (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidPVC: OSStatus = -67708
/// EMM load failed (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecEMMLoadFailed: OSStatus = -67709
/// EMM unload failed (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecEMMUnloadFailed: OSStatus = -67710
/// Addin load failed (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecAddinLoadFailed: OSStatus = -67711
/// Invalid key ref (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidKeyRef: OSStatus = -67712
/// Invalid key hierarchy (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidKeyHierarchy: OSStatus = -67713
/// Addin unload failed (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecAddinUnloadFailed: OSStatus = -67714
/// Library reference not found (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecLibraryReferenceNotFound: OSStatus = -67715
/// Invalid addin function table (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidAddinFunctionTable: OSStatus = -67716
/// Invalid service mask (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidServiceMask: OSStatus = -67717
/// Module not loaded (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecModuleNotLoaded: OSStatus = -67718
/// Invalid sub service ID (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidSubServiceID: OSStatus = -67719
/// Attribute not in context (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecAttributeNotInContext: OSStatus = -67720
/// Module manager initialize failed (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecModuleManagerInitializeFailed: OSStatus = -67721
/// Module manager not found (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecModuleManagerNotFound: OSStatus = -67722
/// Event notification callback not found (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecEventNotificationCallbackNotFound: OSStatus = -67723
/// Input length error (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInputLengthError: OSStatus = -67724
/// Output length error (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecOutputLengthError: OSStatus = -67725
/// Privilege not supported (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecPrivilegeNotSupported: OSStatus = -67726
/// Device error (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecDeviceError: OSStatus = -67727
/// Attach handle busy (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecAttachHandleBusy: OSStatus = -67728
/// Not logged in (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecNotLoggedIn: OSStatus = -67729
/// Algorithm mismatch (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecAlgorithmMismatch: OSStatus = -67730
/// Key usage incorrect (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecKeyUsageIncorrect: OSStatus = -67731
/// Key blob type incorrect (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecKeyBlobTypeIncorrect: OSStatus = -67732
/// Key header inconsistent (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecKeyHeaderInconsistent: OSStatus = -67733
/// Unsupported key format (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecUnsupportedKeyFormat: OSStatus = -67734
/// Unsupported key size (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecUnsupportedKeySize: OSStatus = -67735
/// Invalid key usage mask (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidKeyUsageMask: OSStatus = -67736
/// Unsupported key usage mask (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecUnsupportedKeyUsageMask: OSStatus = -67737
/// Invalid key attribute mask (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidKeyAttributeMask: OSStatus = -67738
/// Unsupported key attribute mask (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecUnsupportedKeyAttributeMask: OSStatus = -67739
/// Invalid key label (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidKeyLabel: OSStatus = -67740
/// Unsupported key label (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecUnsupportedKeyLabel: OSStatus = -67741
/// Invalid key format (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidKeyFormat: OSStatus = -67742
/// Unsupported vector of buffers (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecUnsupportedVectorOfBuffers: OSStatus = -67743
/// Invalid input vector (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidInputVector: OSStatus = -67744
/// Invalid output vector (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidOutputVector: OSStatus = -67745
/// Invalid context (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidContext: OSStatus = -67746
/// Invalid algorithm (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidAlgorithm: OSStatus = -67747
/// Invalid attribute key (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidAttributeKey: OSStatus = -67748
/// Missing attribute key (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecMissingAttributeKey: OSStatus = -67749
/// Invalid attribute init vector (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidAttributeInitVector: OSStatus = -67750
/// Missing attribute init vector (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecMissingAttributeInitVector: OSStatus = -67751
/// Invalid attribute salt (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidAttributeSalt: OSStatus = -67752
/// Missing attribute salt (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecMissingAttributeSalt: OSStatus = -67753
/// Invalid attribute padding (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidAttributePadding: OSStatus = -67754
/// Missing attribute padding (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecMissingAttributePadding: OSStatus = -67755
/// Invalid attribute random (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidAttributeRandom: OSStatus = -67756
/// Missing attribute random (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecMissingAttributeRandom: OSStatus = -67757
/// Invalid attribute seed (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidAttributeSeed: OSStatus = -67758
/// Missing attribute seed (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecMissingAttributeSeed: OSStatus = -67759
/// Invalid attribute passphrase (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidAttributePassphrase: OSStatus = -67760
/// Missing attribute passphrase (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecMissingAttributePassphrase: OSStatus = -67761
/// Invalid attribute key length (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidAttributeKeyLength: OSStatus = -67762
/// Missing attribute key length (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecMissingAttributeKeyLength: OSStatus = -67763
/// Invalid attribute block size (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidAttributeBlockSize: OSStatus = -67764
/// Missing attribute block size (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecMissingAttributeBlockSize: OSStatus = -67765
/// Invalid attribute output size (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidAttributeOutputSize: OSStatus = -67766
/// Missing attribute output size (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecMissingAttributeOutputSize: OSStatus = -67767
/// Invalid attribute rounds (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidAttributeRounds: OSStatus = -67768
/// Missing attribute rounds (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecMissingAttributeRounds: OSStatus = -67769
/// Invalid algorithm parms (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidAlgorithmParms: OSStatus = -67770
/// Missing algorithm parms (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecMissingAlgorithmParms: OSStatus = -67771
/// Invalid attribute label (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidAttributeLabel: OSStatus = -67772
/// Missing attribute label (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecMissingAttributeLabel: OSStatus = -67773
/// Invalid attribute key type (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidAttributeKeyType: OSStatus = -67774
/// Missing attribute key type (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecMissingAttributeKeyType: OSStatus = -67775
/// Invalid attribute mode (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidAttributeMode: OSStatus = -67776
/// Missing attribute mode (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecMissingAttributeMode: OSStatus = -67777
/// Invalid attribute effective bits (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidAttributeEffectiveBits: OSStatus = -67778
/// Missing attribute effective bits (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecMissingAttributeEffectiveBits: OSStatus = -67779
/// Invalid attribute start date (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidAttributeStartDate: OSStatus = -67780
/// Missing attribute start date (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecMissingAttributeStartDate: OSStatus = -67781
/// Invalid attribute end date (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidAttributeEndDate: OSStatus = -67782
/// Missing attribute end date (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecMissingAttributeEndDate: OSStatus = -67783
/// Invalid attribute version (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidAttributeVersion: OSStatus = -67784
/// Missing attribute version (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecMissingAttributeVersion: OSStatus = -67785
/// Invalid attribute prime (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidAttributePrime: OSStatus = -67786
/// Missing attribute prime (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecMissingAttributePrime: OSStatus = -67787
/// Invalid attribute base (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidAttributeBase: OSStatus = -67788
/// Missing attribute base (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecMissingAttributeBase: OSStatus = -67789
/// Invalid attribute subprime (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidAttributeSubprime: OSStatus = -67790
/// Missing attribute subprime (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecMissingAttributeSubprime: OSStatus = -67791
/// Invalid attribute iteration count (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidAttributeIterationCount: OSStatus = -67792
/// Missing attribute iteration count (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecMissingAttributeIterationCount: OSStatus = -67793
/// Invalid attribute DLDB handle (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidAttributeDLDBHandle: OSStatus = -67794
/// Missing attribute DLDB handle (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecMissingAttributeDLDBHandle: OSStatus = -67795
/// Invalid attribute access credentials (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidAttributeAccessCredentials: OSStatus = -67796
/// Missing attribute access credentials (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecMissingAttributeAccessCredentials: OSStatus = -67797
/// Invalid attribute public key format (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidAttributePublicKeyFormat: OSStatus = -67798
/// Missing attribute public key format (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecMissingAttributePublicKeyFormat: OSStatus = -67799
/// Invalid attribute private key format (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidAttributePrivateKeyFormat: OSStatus = -67800
/// Missing attribute private key format (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecMissingAttributePrivateKeyFormat: OSStatus = -67801
/// Invalid attribute symmetric key format (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidAttributeSymmetricKeyFormat: OSStatus = -67802
/// Missing attribute symmetric key format (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecMissingAttributeSymmetricKeyFormat: OSStatus = -67803
/// Invalid attribute wrapped key format (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidAttributeWrappedKeyFormat: OSStatus = -67804
/// Missing attribute wrapped key format (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecMissingAttributeWrappedKeyFormat: OSStatus = -67805
/// Staged operation in progress (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecStagedOperationInProgress: OSStatus = -67806
/// Staged operation not started (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecStagedOperationNotStarted: OSStatus = -67807
/// Verify failed (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecVerifyFailed: OSStatus = -67808
/// Query size unknown (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecQuerySizeUnknown: OSStatus = -67809
/// Block size mismatch (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecBlockSizeMismatch: OSStatus = -67810
/// Public key inconsistent (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecPublicKeyInconsistent: OSStatus = -67811
/// Device verify failed (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecDeviceVerifyFailed: OSStatus = -67812
/// Invalid login name (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidLoginName: OSStatus = -67813
/// Already logged in (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecAlreadyLoggedIn: OSStatus = -67814
/// Invalid digest algorithm (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidDigestAlgorithm: OSStatus = -67815
/// Invalid CRL group (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidCRLGroup: OSStatus = -67816
/// Certificate cannot operate (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecCertificateCannotOperate: OSStatus = -67817
/// Certificate expired (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecCertificateExpired: OSStatus = -67818
/// Certificate not valid yet (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecCertificateNotValidYet: OSStatus = -67819
/// Certificate revoked (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecCertificateRevoked: OSStatus = -67820
/// Certificate suspended (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecCertificateSuspended: OSStatus = -67821
/// Insufficient credentials (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInsufficientCredentials: OSStatus = -67822
/// Invalid action (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidAction: OSStatus = -67823
/// Invalid authority (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidAuthority: OSStatus = -67824
/// Verify action failed (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecVerifyActionFailed: OSStatus = -67825
/// Invalid cert authority (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidCertAuthority: OSStatus = -67826
/// Invalid CRL authority (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidCRLAuthority: OSStatus = -67827
/// A CRL authority was not valid (Apple's misspelled alias of errSecInvalidCRLAuthority).
public let errSecInvaldCRLAuthority: OSStatus = -67827
/// Invalid CRL encoding (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidCRLEncoding: OSStatus = -67828
/// Invalid CRL type (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidCRLType: OSStatus = -67829
/// Invalid CRL (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidCRL: OSStatus = -67830
/// Invalid form type (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidFormType: OSStatus = -67831
/// Invalid ID (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidID: OSStatus = -67832
/// Invalid identifier (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidIdentifier: OSStatus = -67833
/// Invalid index (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidIndex: OSStatus = -67834
/// Invalid policy identifiers (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidPolicyIdentifiers: OSStatus = -67835
/// Invalid time string (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidTimeString: OSStatus = -67836
/// Invalid reason (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidReason: OSStatus = -67837
/// Invalid request inputs (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidRequestInputs: OSStatus = -67838
/// Invalid response vector (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidResponseVector: OSStatus = -67839
/// Invalid stop on policy (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidStopOnPolicy: OSStatus = -67840
/// Invalid tuple (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidTuple: OSStatus = -67841
/// Multiple values unsupported (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecMultipleValuesUnsupported: OSStatus = -67842
/// Not trusted (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecNotTrusted: OSStatus = -67843
/// No default authority (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecNoDefaultAuthority: OSStatus = -67844
/// Rejected form (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecRejectedForm: OSStatus = -67845
/// Request lost (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecRequestLost: OSStatus = -67846
/// Request rejected (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecRequestRejected: OSStatus = -67847
/// Unsupported address type (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecUnsupportedAddressType: OSStatus = -67848
/// Unsupported service (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecUnsupportedService: OSStatus = -67849
/// Invalid tuple group (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidTupleGroup: OSStatus = -67850
/// Invalid base ACLs (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidBaseACLs: OSStatus = -67851
/// Invalid tuple credentials (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidTupleCredentials: OSStatus = -67852
/// Tuple credentials were not valid (Apple's misspelled alias of errSecInvalidTupleCredentials).
public let errSecInvalidTupleCredendtials: OSStatus = -67852
/// Invalid encoding (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidEncoding: OSStatus = -67853
/// Invalid validity period (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidValidityPeriod: OSStatus = -67854
/// Invalid requestor (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidRequestor: OSStatus = -67855
/// Request descriptor (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecRequestDescriptor: OSStatus = -67856
/// Invalid bundle info (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidBundleInfo: OSStatus = -67857
/// Invalid CRL index (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidCRLIndex: OSStatus = -67858
/// No field values (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecNoFieldValues: OSStatus = -67859
/// Unsupported field format (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecUnsupportedFieldFormat: OSStatus = -67860
/// Unsupported index info (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecUnsupportedIndexInfo: OSStatus = -67861
/// Unsupported locality (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecUnsupportedLocality: OSStatus = -67862
/// Unsupported num attributes (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecUnsupportedNumAttributes: OSStatus = -67863
/// Unsupported num indexes (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecUnsupportedNumIndexes: OSStatus = -67864
/// Unsupported num record types (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecUnsupportedNumRecordTypes: OSStatus = -67865
/// Field specified multiple (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecFieldSpecifiedMultiple: OSStatus = -67866
/// Incompatible field format (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecIncompatibleFieldFormat: OSStatus = -67867
/// Invalid parsing module (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidParsingModule: OSStatus = -67868
/// Database locked (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecDatabaseLocked: OSStatus = -67869
/// Datastore is open (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecDatastoreIsOpen: OSStatus = -67870
/// Missing value (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecMissingValue: OSStatus = -67871
/// Unsupported query limits (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecUnsupportedQueryLimits: OSStatus = -67872
/// Unsupported num selection preds (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecUnsupportedNumSelectionPreds: OSStatus = -67873
/// Unsupported operator (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecUnsupportedOperator: OSStatus = -67874
/// Invalid DB location (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidDBLocation: OSStatus = -67875
/// Invalid access request (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidAccessRequest: OSStatus = -67876
/// Invalid index info (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidIndexInfo: OSStatus = -67877
/// Invalid new owner (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidNewOwner: OSStatus = -67878
/// Invalid modify mode (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecInvalidModifyMode: OSStatus = -67879
/// Missing required extension (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecMissingRequiredExtension: OSStatus = -67880
/// Extended key usage not critical (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecExtendedKeyUsageNotCritical: OSStatus = -67881
/// Timestamp missing (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecTimestampMissing: OSStatus = -67882
/// Timestamp invalid (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecTimestampInvalid: OSStatus = -67883
/// Timestamp not trusted (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecTimestampNotTrusted: OSStatus = -67884
/// Timestamp service not available (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecTimestampServiceNotAvailable: OSStatus = -67885
/// Timestamp bad alg (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecTimestampBadAlg: OSStatus = -67886
/// Timestamp bad request (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecTimestampBadRequest: OSStatus = -67887
/// Timestamp bad data format (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecTimestampBadDataFormat: OSStatus = -67888
/// Timestamp time not available (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecTimestampTimeNotAvailable: OSStatus = -67889
/// Timestamp unaccepted policy (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecTimestampUnacceptedPolicy: OSStatus = -67890
/// Timestamp unaccepted extension (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecTimestampUnacceptedExtension: OSStatus = -67891
/// Timestamp add info not available (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecTimestampAddInfoNotAvailable: OSStatus = -67892
/// Timestamp system failure (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecTimestampSystemFailure: OSStatus = -67893
/// Signing time missing (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecSigningTimeMissing: OSStatus = -67894
/// Timestamp rejection (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecTimestampRejection: OSStatus = -67895
/// Timestamp waiting (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecTimestampWaiting: OSStatus = -67896
/// Timestamp revocation warning (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecTimestampRevocationWarning: OSStatus = -67897
/// Timestamp revocation notification (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecTimestampRevocationNotification: OSStatus = -67898
/// Certificate policy not allowed (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecCertificatePolicyNotAllowed: OSStatus = -67899
/// Certificate name not allowed (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecCertificateNameNotAllowed: OSStatus = -67900
/// Certificate validity period too long (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecCertificateValidityPeriodTooLong: OSStatus = -67901
/// Certificate is CA (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecCertificateIsCA: OSStatus = -67902
/// Certificate duplicate extension (certificate, trust or CSSM; never returned by the keychain calls here).
public let errSecCertificateDuplicateExtension: OSStatus = -67903

/// The sentence for each code above, for `SecCopyErrorMessageString` (first name wins for aliases).
let secBaseMessages: [OSStatus: String] = [
    -67903: "Certificate duplicate extension.",
    -67902: "Certificate is CA.",
    -67901: "Certificate validity period too long.",
    -67900: "Certificate name not allowed.",
    -67899: "Certificate policy not allowed.",
    -67898: "Timestamp revocation notification.",
    -67897: "Timestamp revocation warning.",
    -67896: "Timestamp waiting.",
    -67895: "Timestamp rejection.",
    -67894: "Signing time missing.",
    -67893: "Timestamp system failure.",
    -67892: "Timestamp add info not available.",
    -67891: "Timestamp unaccepted extension.",
    -67890: "Timestamp unaccepted policy.",
    -67889: "Timestamp time not available.",
    -67888: "Timestamp bad data format.",
    -67887: "Timestamp bad request.",
    -67886: "Timestamp bad alg.",
    -67885: "Timestamp service not available.",
    -67884: "Timestamp not trusted.",
    -67883: "Timestamp invalid.",
    -67882: "Timestamp missing.",
    -67881: "Extended key usage not critical.",
    -67880: "Missing required extension.",
    -67879: "Invalid modify mode.",
    -67878: "Invalid new owner.",
    -67877: "Invalid index info.",
    -67876: "Invalid access request.",
    -67875: "Invalid DB location.",
    -67874: "Unsupported operator.",
    -67873: "Unsupported num selection preds.",
    -67872: "Unsupported query limits.",
    -67871: "Missing value.",
    -67870: "Datastore is open.",
    -67869: "Database locked.",
    -67868: "Invalid parsing module.",
    -67867: "Incompatible field format.",
    -67866: "Field specified multiple.",
    -67865: "Unsupported num record types.",
    -67864: "Unsupported num indexes.",
    -67863: "Unsupported num attributes.",
    -67862: "Unsupported locality.",
    -67861: "Unsupported index info.",
    -67860: "Unsupported field format.",
    -67859: "No field values.",
    -67858: "Invalid CRL index.",
    -67857: "Invalid bundle info.",
    -67856: "Request descriptor.",
    -67855: "Invalid requestor.",
    -67854: "Invalid validity period.",
    -67853: "Invalid encoding.",
    -67852: "Invalid tuple credentials.",
    -67851: "Invalid base ACLs.",
    -67850: "Invalid tuple group.",
    -67849: "Unsupported service.",
    -67848: "Unsupported address type.",
    -67847: "Request rejected.",
    -67846: "Request lost.",
    -67845: "Rejected form.",
    -67844: "No default authority.",
    -67843: "Not trusted.",
    -67842: "Multiple values unsupported.",
    -67841: "Invalid tuple.",
    -67840: "Invalid stop on policy.",
    -67839: "Invalid response vector.",
    -67838: "Invalid request inputs.",
    -67837: "Invalid reason.",
    -67836: "Invalid time string.",
    -67835: "Invalid policy identifiers.",
    -67834: "Invalid index.",
    -67833: "Invalid identifier.",
    -67832: "Invalid ID.",
    -67831: "Invalid form type.",
    -67830: "Invalid CRL.",
    -67829: "Invalid CRL type.",
    -67828: "Invalid CRL encoding.",
    -67827: "Invalid CRL authority.",
    -67826: "Invalid cert authority.",
    -67825: "Verify action failed.",
    -67824: "Invalid authority.",
    -67823: "Invalid action.",
    -67822: "Insufficient credentials.",
    -67821: "Certificate suspended.",
    -67820: "Certificate revoked.",
    -67819: "Certificate not valid yet.",
    -67818: "Certificate expired.",
    -67817: "Certificate cannot operate.",
    -67816: "Invalid CRL group.",
    -67815: "Invalid digest algorithm.",
    -67814: "Already logged in.",
    -67813: "Invalid login name.",
    -67812: "Device verify failed.",
    -67811: "Public key inconsistent.",
    -67810: "Block size mismatch.",
    -67809: "Query size unknown.",
    -67808: "Verify failed.",
    -67807: "Staged operation not started.",
    -67806: "Staged operation in progress.",
    -67805: "Missing attribute wrapped key format.",
    -67804: "Invalid attribute wrapped key format.",
    -67803: "Missing attribute symmetric key format.",
    -67802: "Invalid attribute symmetric key format.",
    -67801: "Missing attribute private key format.",
    -67800: "Invalid attribute private key format.",
    -67799: "Missing attribute public key format.",
    -67798: "Invalid attribute public key format.",
    -67797: "Missing attribute access credentials.",
    -67796: "Invalid attribute access credentials.",
    -67795: "Missing attribute DLDB handle.",
    -67794: "Invalid attribute DLDB handle.",
    -67793: "Missing attribute iteration count.",
    -67792: "Invalid attribute iteration count.",
    -67791: "Missing attribute subprime.",
    -67790: "Invalid attribute subprime.",
    -67789: "Missing attribute base.",
    -67788: "Invalid attribute base.",
    -67787: "Missing attribute prime.",
    -67786: "Invalid attribute prime.",
    -67785: "Missing attribute version.",
    -67784: "Invalid attribute version.",
    -67783: "Missing attribute end date.",
    -67782: "Invalid attribute end date.",
    -67781: "Missing attribute start date.",
    -67780: "Invalid attribute start date.",
    -67779: "Missing attribute effective bits.",
    -67778: "Invalid attribute effective bits.",
    -67777: "Missing attribute mode.",
    -67776: "Invalid attribute mode.",
    -67775: "Missing attribute key type.",
    -67774: "Invalid attribute key type.",
    -67773: "Missing attribute label.",
    -67772: "Invalid attribute label.",
    -67771: "Missing algorithm parms.",
    -67770: "Invalid algorithm parms.",
    -67769: "Missing attribute rounds.",
    -67768: "Invalid attribute rounds.",
    -67767: "Missing attribute output size.",
    -67766: "Invalid attribute output size.",
    -67765: "Missing attribute block size.",
    -67764: "Invalid attribute block size.",
    -67763: "Missing attribute key length.",
    -67762: "Invalid attribute key length.",
    -67761: "Missing attribute passphrase.",
    -67760: "Invalid attribute passphrase.",
    -67759: "Missing attribute seed.",
    -67758: "Invalid attribute seed.",
    -67757: "Missing attribute random.",
    -67756: "Invalid attribute random.",
    -67755: "Missing attribute padding.",
    -67754: "Invalid attribute padding.",
    -67753: "Missing attribute salt.",
    -67752: "Invalid attribute salt.",
    -67751: "Missing attribute init vector.",
    -67750: "Invalid attribute init vector.",
    -67749: "Missing attribute key.",
    -67748: "Invalid attribute key.",
    -67747: "Invalid algorithm.",
    -67746: "Invalid context.",
    -67745: "Invalid output vector.",
    -67744: "Invalid input vector.",
    -67743: "Unsupported vector of buffers.",
    -67742: "Invalid key format.",
    -67741: "Unsupported key label.",
    -67740: "Invalid key label.",
    -67739: "Unsupported key attribute mask.",
    -67738: "Invalid key attribute mask.",
    -67737: "Unsupported key usage mask.",
    -67736: "Invalid key usage mask.",
    -67735: "Unsupported key size.",
    -67734: "Unsupported key format.",
    -67733: "Key header inconsistent.",
    -67732: "Key blob type incorrect.",
    -67731: "Key usage incorrect.",
    -67730: "Algorithm mismatch.",
    -67729: "Not logged in.",
    -67728: "Attach handle busy.",
    -67727: "Device error.",
    -67726: "Privilege not supported.",
    -67725: "Output length error.",
    -67724: "Input length error.",
    -67723: "Event notification callback not found.",
    -67722: "Module manager not found.",
    -67721: "Module manager initialize failed.",
    -67720: "Attribute not in context.",
    -67719: "Invalid sub service ID.",
    -67718: "Module not loaded.",
    -67717: "Invalid service mask.",
    -67716: "Invalid addin function table.",
    -67715: "Library reference not found.",
    -67714: "Addin unload failed.",
    -67713: "Invalid key hierarchy.",
    -67712: "Invalid key ref.",
    -67711: "Addin load failed.",
    -67710: "EMM unload failed.",
    -67709: "EMM load failed.",
    -67708: "Invalid PVC.",
    -67707: "PVC already configured.",
    -67706: "Invalid scope.",
    -67705: "Privilege not granted.",
    -67704: "Incompatible version.",
    -67703: "Invalid sample value.",
    -67702: "Invalid ACL.",
    -67701: "Invalid record.",
    -67700: "Invalid access credentials.",
    -67699: "ACL change failed.",
    -67698: "ACL add failed.",
    -67697: "ACL replace failed.",
    -67696: "ACL delete failed.",
    -67695: "Callback failed.",
    -67694: "Invalid value.",
    -67693: "Invalid query.",
    -67692: "Tag not found.",
    -67691: "Invalid certificate group.",
    -67690: "Invalid certificate ref.",
    -67689: "Invalid name.",
    -67688: "Invalid signature.",
    -67687: "Unknown tag.",
    -67686: "Verification failure.",
    -67685: "Invalid number of fields.",
    -67684: "CRL already signed.",
    -67683: "Invalid network address.",
    -67682: "Invalid passthrough ID.",
    -67681: "Invalid DB list.",
    -67680: "Invalid handle.",
    -67679: "Invalid GUID.",
    -67678: "Module manifest verify failed.",
    -67677: "Function failed.",
    -67676: "Self check failed.",
    -67675: "Invalid pointer.",
    -67674: "MDS error.",
    -67673: "Invalid data.",
    -67672: "Memory error.",
    -67671: "Internal error.",
    -67670: "Function integrity fail.",
    -67669: "PVC referent not found.",
    -67668: "Invalid handle usage.",
    -67667: "Not initialized.",
    -67666: "MobileMe failed consistency check.",
    -67665: "MobileMe CSR verify failure.",
    -67664: "MobileMe no request pending.",
    -67663: "MobileMe request already pending.",
    -67662: "MobileMe server service err.",
    -67661: "MobileMe server already exists.",
    -67660: "MobileMe server not available.",
    -67659: "MobileMe server error.",
    -67658: "MobileMe request redirected.",
    -67657: "MobileMe request queued.",
    -67656: "Unknown qualified cert statement.",
    -67655: "Invalid subject name.",
    -67654: "Trust setting deny.",
    -67653: "Resource sign bad ext key usage.",
    -67652: "Resource sign bad cert chain length.",
    -67651: "Code signing development.",
    -67650: "Code signing no extended key usage.",
    -67649: "Code signing bad path length constraint.",
    -67648: "Code signing no basic constraints.",
    -67647: "Code signing bad cert chain length.",
    -67646: "OCSP response nonce mismatch.",
    -67645: "OCSP responder unauthorized.",
    -67644: "OCSP responder signature required.",
    -67643: "OCSP responder try later.",
    -67642: "OCSP responder internal error.",
    -67641: "OCSP responder malformed req.",
    -67640: "OCSP no signer.",
    -67639: "OCSP signature error.",
    -67638: "Record modified.",
    -67637: "OCSP not trusted to anchor.",
    -67636: "Network failure.",
    -67635: "Incomplete cert revocation check.",
    -67634: "End of data.",
    -67633: "OCSP status unrecognized.",
    -67632: "OCSP unavailable.",
    -67631: "OCSP bad request.",
    -67630: "OCSP bad response.",
    -67629: "SSL bad extended key usage.",
    -67628: "SMIME subj alt name not critical.",
    -67627: "SMIME no email address.",
    -67626: "SMIME key usage not critical.",
    -67625: "SMIME bad key usage.",
    -67624: "SMIME bad extended key usage.",
    -67623: "SMIME email addresses not found.",
    -67622: "IDP failure.",
    -67621: "CRL policy failed.",
    -67620: "CRL not trusted.",
    -67619: "Unknown CRL extension.",
    -67618: "Unknown cert extension.",
    -67617: "CRL bad URI.",
    -67616: "CRL server down.",
    -67615: "CRL not found.",
    -67614: "CRL not valid yet.",
    -67613: "CRL expired.",
    -67612: "Invalid root.",
    -67611: "Path length constraint exceeded.",
    -67610: "Invalid ID linkage.",
    -67609: "Invalid extended key usage.",
    -67608: "Invalid key usage for policy.",
    -67607: "Invalid subject key ID.",
    -67606: "Invalid authority key ID.",
    -67605: "No basic constraints CA.",
    -67604: "No basic constraints.",
    -67603: "Unknown critical extension flag.",
    -67602: "Host name mismatch.",
    -67601: "Incompatible key blob.",
    -67600: "Incompatible database blob.",
    -67599: "Invalid key blob.",
    -67598: "Invalid database blob.",
    -67597: "File too big.",
    -67596: "Quota exceeded.",
    -67595: "Apple SSLv2 rollback.",
    -67594: "Conversion error.",
    -67593: "Apple invalid key end date.",
    -67592: "Apple invalid key start date.",
    -67591: "Apple signature mismatch.",
    -67590: "Apple public key incomplete.",
    -67589: "Apple add app ACL subject.",
    -67588: "Device failed.",
    -67587: "Device reset.",
    -67586: "Insufficient client ID.",
    -67585: "Service not available.",
    -26275: "The data could not be decoded.",
    -26270: "The certificate chain was not trusted: a policy did not accept it.",
    -26267: "The certificate was not signed by its proposed parent.",
    -26265: "The certificate is not valid.",
    -25264: "The MAC of a PKCS12 blob failed verification.",
    -25263: "No trust settings were found.",
    -25262: "The trust settings are not valid.",
    -25261: "The password reference is not valid.",
    -25260: "A passphrase is required for import or export.",
    -25259: "An attempt was made to import multiple private keys.",
    -25258: "The key must be wrapped to be exported.",
    -25257: "The item's format is not known.",
    -25256: "The import or export format is not supported.",
    -25245: "No trust results are available.",
    -25244: "The owner edit is not valid.",
    -25243: "The item has no access control.",
    -25242: "The trust setting is not valid.",
    -25241: "The policy could not be found.",
    -25240: "The access control list is not in simple form.",
    -25320: "The user interface cannot be shown in dark wake.",
    -25319: "The preference domain is not valid.",
    -25318: "A certificate chain could not be created.",
    -25317: "The data cannot be modified.",
    -25316: "The data is not available.",
    -25315: "User interaction is required.",
    -25314: "No policy module is available.",
    -25313: "No certificate module is available.",
    -25312: "No storage module is available.",
    -25311: "The key size is not allowed.",
    -25310: "The version is incorrect.",
    -25309: "The attribute is read-only.",
    -25308: "User interaction is not allowed.",
    -25307: "No default keychain.",
    -25306: "The keychain item class does not exist.",
    -25305: "The search reference is not valid.",
    -25304: "The item reference is not valid.",
    -25303: "The attribute does not exist.",
    -25302: "The data is too large.",
    -25301: "The buffer is too small.",
    -25300: "The item could not be found.",
    -25299: "The item already exists.",
    -25298: "The callback is not valid.",
    -25297: "The callback is already registered.",
    -25296: "A keychain with the same name already exists.",
    -25295: "The keychain is not valid.",
    -25294: "The keychain does not exist.",
    -25293: "The user name or passphrase was not correct.",
    -25292: "The keychain is read-only.",
    -25291: "No keychain is available.",
    -34020: "The client is restricted from this API.",
    -34018:
        "A required entitlement is missing (Apple's code signing; Latchkey has no entitlements and never returns it).",
    -4960: "An unknown Core Foundation error.",
    -2070: "An internal component failed.",
    -909: "A bad parameter or an invalid state for the operation.",
    -128: "The user cancelled the operation.",
    -108: "Memory could not be allocated.",
    -61: "Write permission denied.",
    -50: "One or more parameters passed to a function were not valid.",
    -49: "A file is already open with write permission.",
    -36: "An input/output error.",
    -34: "The disk is full.",
    -4: "Function or operation not implemented.",
    0: "No error.",
]
