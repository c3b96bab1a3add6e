// Package verify appraises SEV-SNP reports and TDX quotes for the
// background-check model of RFC 9334: the caller hands it the evidence a
// node sent in answer to a challenge, and it returns either a Result that
// says what the evidence proves, or an *Error with a reason code from
// components/api/guard.
//
// Verify checks in a fixed order and stops at the first failure, because
// later checks would judge facts that cannot be relied on:
//
//  1. the challenge is fresh (ATTESTATION_STALE);
//  2. the evidence decodes strictly and its signature and certificate
//     chain verify against a trusted root at the verifier's clock
//     (QUOTE_INVALID), and under the production profile that root is not
//     the lab's (TEST_ROOT_OF_TRUST);
//  3. the report data is the challenge's nonce (NONCE_MISMATCH);
//  4. the guest does not allow debugging (DEBUG_POLICY);
//  5. the platform TCB is at least the minimum (TCB_OUT_OF_DATE);
//  6. the launch measurement, with its host data or MRCONFIGID, matches a
//     reference value (MEASUREMENT_NOT_ALLOWED) that has not expired
//     (MEASUREMENT_EXPIRED);
//  7. for TDX, Intel's collateral verifies and rates the platform's TCB and
//     quoting enclave up to date (TCB_OUT_OF_DATE; QUOTE_INVALID when the
//     collateral itself fails).
//
// Production trusts AMD's and Intel's roots only; the lab profile also
// trusts a lab SEV-SNP root (see labtee). The verifier opens no
// connection: SEV-SNP certificates come with the evidence, and TDX
// collateral from the getter the caller injects.
package verify
