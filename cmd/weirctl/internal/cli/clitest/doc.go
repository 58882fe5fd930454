// Package clitest runs weirctl command trees in-process for tests, and
// holds the checks that the tests of several packages share.
package clitest
