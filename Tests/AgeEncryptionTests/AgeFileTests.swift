import AgeEncryption
import Posix
import Testing

@Suite struct AgeRequirementTests {
    @Test func aFileWithoutTheAgeVersionLineIsNoAgeFile() {
        #expect(AgeFile.requirement(of: Array("{\"version\": 1}".utf8)) == nil)
        #expect(AgeFile.requirement(of: []) == nil)
    }
}
