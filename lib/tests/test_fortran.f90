! test_fortran - the Fortran module (use shoal) over libshoal, the way a Fortran program
! meets it: a run that checkpoints and dies, then a run that restores.
!
! The mode is the first argument or $TEST_FORTRAN_MODE (write and read use the latter).
!
!   test_fortran write     protects every supported type at ranks 0 to 3, and module
!                          arrays of rank 5 and 7, with known
!                          values, checkpoints twice (the second completes the first
!                          epoch) and leaves without shoal_finalize, like a killed run
!   test_fortran read      the next run in the same directory: restarted, stored counts,
!                          every value restored in place by shoal_snapshot
!   test_fortran init CODE shoal_init must return CODE (a test vector put in place by the
!                          caller, who names the code the C library must give for it)
!   test_fortran elastic-write   protects a block of real(8), a 2-d subarray of
!                          integer(4) (a block of columns per rank) and replicated values,
!                          checkpoints and leaves without shoal_finalize
!   test_fortran elastic-read    the next run, on another number of ranks: restarted on
!                          another count, each rank's new part of every array restored,
!                          an old rank's bytes read with shoal_read_old
!   test_fortran elastic-refuse  with SHOAL_ELASTIC=1: shoal_protect refused
!
! Prints "N passed, M failed" and exits 1 when a check failed.

! State kept in a module, as NAS LU, BT and SP keep theirs, in arrays of rank 4 and more:
! the target attribute goes on the module's declaration.
module solver_state
    use, intrinsic :: iso_c_binding, only: c_double, c_int32_t
    implicit none
    real(c_double), target :: u(2, 3, 2, 2, 2)
    integer(c_int32_t), target :: flags(1, 2, 1, 2, 1, 2, 2)
end module solver_state

program test_fortran
    use mpi
    use shoal
    use solver_state
    use, intrinsic :: iso_c_binding, only: c_float, c_double, c_int32_t, c_int64_t, &
        c_double_complex
    implicit none

    real(c_float), target :: r4_0, r4_1(3), r4_2(2, 3), r4_3(2, 2, 2)
    real(c_double), target :: r8_0, r8_1(3), r8_2(2, 3), r8_3(2, 2, 2)
    integer(c_int32_t), target :: i4_0, i4_1(3), i4_2(2, 3), i4_3(2, 2, 2)
    integer(c_int64_t), target :: i8_0, i8_1(3), i8_2(2, 3), i8_3(2, 2, 2)
    complex(c_double_complex), target :: c8_0, c8_1(3), c8_2(2, 3), c8_3(2, 2, 2)
    logical, target :: l_0, l_1(3), l_2(2, 3), l_3(2, 2, 2)
    real(c_double), allocatable, target :: grown(:)
    real(c_double), target :: strided(10)
    integer :: passed = 0, failed = 0, ierr, rank, nranks, code
    real(c_double), allocatable, target :: blk(:)
    integer(c_int32_t), allocatable, target :: box(:, :)
    real(c_double), target :: params(3), old(2)
    integer(c_int32_t), target :: step
    integer :: first, cols, col0, nold, k
    integer(c_int64_t) :: bytes
    integer, parameter :: GLOBAL = 1003, ROWS = 4, COLS_ALL = 9
    integer(c_int64_t) :: count
    character(len=16) :: mode, arg

    call MPI_Init(ierr)
    call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
    call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)
    ! The mode may come from the environment: a standalone checkpoint belongs to the
    ! program's arguments, so write and read must run with the same ones.
    call get_environment_variable("TEST_FORTRAN_MODE", mode)
    if (len_trim(mode) == 0) call get_command_argument(1, mode)

    select case (mode)
    case ("write")
        call shoal_init(MPI_COMM_WORLD, ierr)
        call check(ierr == SHOAL_SUCCESS, "shoal_init")
        call check(shoal_status() == 0, "fresh start: shoal_status 0")
        call fill(rank)
        call protect_all(ierr)
        call check(ierr == SHOAL_SUCCESS, "shoal_protect of every type and rank")
        call shoal_protect(99, strided(1:10:2), ierr)
        call check(ierr == SHOAL_ERR_ARG, "a strided section is refused with SHOAL_ERR_ARG")
        call shoal_unprotect(98, ierr)
        call check(ierr == SHOAL_ERR_NOTFOUND, "unprotecting an unknown id: SHOAL_ERR_NOTFOUND")
        call shoal_stored_count(1, count, ierr)
        call check(ierr == SHOAL_ERR_NOCKPT, "stored count on a fresh start: SHOAL_ERR_NOCKPT")
        call check(shoal_strerror(SHOAL_ERR_CORRUPT) == &
            "corrupt shard (bad magic, truncated or checksum mismatch)", "shoal_strerror")
        call check(shoal_version_number() >= 100, "shoal_version_number")
        call shoal_progress(0.5d0, ierr)
        call check(ierr == SHOAL_SUCCESS, "shoal_progress")
        call shoal_checkpoint(ierr)
        call check(ierr == SHOAL_SUCCESS, "first shoal_checkpoint")
        ! Changed after the first checkpoint: the restart must restore the second one.
        call fill(rank + 1)
        call shoal_checkpoint(ierr)
        call check(ierr == SHOAL_SUCCESS, "second shoal_checkpoint")
        call shoal_checkpoint(ierr)
        call check(ierr == SHOAL_SUCCESS, "third shoal_checkpoint")
    case ("read")
        call shoal_init(MPI_COMM_WORLD, ierr)
        call check(ierr == SHOAL_SUCCESS, "shoal_init")
        call check(shoal_status() == 1, "restarted: shoal_status 1")
        call shoal_stored_count(16, count, ierr)
        call check(ierr == SHOAL_SUCCESS .and. count == 8, "stored count of a 2x2x2 array")
        call shoal_stored_count(97, count, ierr)
        call check(ierr == SHOAL_ERR_NOTFOUND, "stored count of an id never protected")
        call fill(-7)
        call protect_all(ierr)
        call check(ierr == SHOAL_SUCCESS, "shoal_protect of every type and rank")
        allocate (grown(4))
        call shoal_protect(30, grown, ierr)
        call shoal_snapshot(ierr)
        call check(ierr == SHOAL_ERR_NOTFOUND, "recovering a region the checkpoint lacks")
        call shoal_unprotect(30)
        call shoal_snapshot(ierr)
        call check(ierr == SHOAL_SUCCESS, "shoal_snapshot recovers")
        call check(same(rank + 1), "every variable restored to its checkpointed value")
        call shoal_finalize(ierr)
        call check(ierr == SHOAL_SUCCESS, "shoal_finalize")
    case ("init")
        call get_command_argument(2, arg)
        read (arg, *) code
        call shoal_init(MPI_COMM_WORLD, ierr)
        call check(ierr == code, "shoal_init returns the vector's code")
        if (ierr /= code) write (*, '("  got ", i0, " (", a, "), want ", i0)') &
            ierr, shoal_strerror(ierr), code
        if (ierr == SHOAL_SUCCESS) then
            call check(shoal_status() == 1, "a valid vector is a restart")
            call shoal_recover(ierr)
            call check(ierr == SHOAL_SUCCESS, "recovering nothing from it")
            call shoal_finalize()
        end if
    case ("elastic-write", "elastic-read")
        call shoal_init(MPI_COMM_WORLD, ierr)
        call check(ierr == SHOAL_SUCCESS, "shoal_init")
        call split(GLOBAL, nranks, rank, first, k)
        allocate (blk(k))
        call split(COLS_ALL, nranks, rank, col0, cols)
        allocate (box(ROWS, cols))
        blk = -1
        box = -1
        params = 0
        step = 0
        if (mode == "elastic-write") then
            call check(shoal_status() == SHOAL_FRESH, "fresh start: SHOAL_FRESH")
            call fill_elastic()
        else
            call check(shoal_status() == SHOAL_RESIZED, "restarted on another count: SHOAL_RESIZED")
            call shoal_restart_nranks(nold, ierr)
            call check(ierr == SHOAL_SUCCESS .and. nold == 2, "shoal_restart_nranks: 2")
            call shoal_stored_count(41, count, ierr)
            call check(ierr == SHOAL_SUCCESS .and. count == GLOBAL, "stored count of a block: its global count")
        end if
        call shoal_protect_block(41, blk, int(GLOBAL, c_int64_t), int(first, c_int64_t), ierr)
        call check(ierr == SHOAL_SUCCESS, "shoal_protect_block")
        call shoal_protect_subarray(42, box, [ROWS, COLS_ALL], [0, col0], ierr)
        call check(ierr == SHOAL_SUCCESS, "shoal_protect_subarray")
        call shoal_protect_replicated(43, step, ierr)
        call shoal_protect_replicated(44, params, k)
        call check(ierr == SHOAL_SUCCESS .and. k == SHOAL_SUCCESS, "shoal_protect_replicated")
        call shoal_protect_subarray(45, box, [ROWS], [0], ierr)
        call check(ierr == SHOAL_ERR_ARG, "a subarray's sizes need a value per dimension")
        if (mode == "elastic-write") then
            call shoal_checkpoint(ierr)
            call check(ierr == SHOAL_SUCCESS, "shoal_checkpoint")
            call shoal_checkpoint(ierr)
            call check(ierr == SHOAL_SUCCESS, "a second shoal_checkpoint completes the first")
        else
            call shoal_snapshot(ierr)
            call check(ierr == SHOAL_SUCCESS, "shoal_snapshot recovers from 2 ranks")
            call check(elastic_same(), "every rank's new part restored")
            call shoal_old_bytes(1, 41, bytes, ierr)
            call split(GLOBAL, 2, 1, first, k)
            call check(ierr == SHOAL_SUCCESS .and. bytes == 8 * k, "shoal_old_bytes of old rank 1")
            call shoal_read_old(1, 41, 8_c_int64_t, old, ierr)
            call check(ierr == SHOAL_SUCCESS .and. old(1) == first + 1.5d0 .and. &
                old(2) == first + 2.5d0, "shoal_read_old of old rank 1's block")
            call shoal_finalize(ierr)
            call check(ierr == SHOAL_SUCCESS, "shoal_finalize")
        end if
    case ("elastic-refuse")
        call shoal_init(MPI_COMM_WORLD, ierr)
        call shoal_protect(1, r8_1, ierr)
        call check(ierr == SHOAL_ERR_PERRANK, "SHOAL_ELASTIC=1: shoal_protect refused")
        call shoal_protect_replicated(1, r8_1, ierr)
        call check(ierr == SHOAL_SUCCESS, "SHOAL_ELASTIC=1: shoal_protect_replicated taken")
        call shoal_finalize()
    case default
        write (*, '(a)') "usage: test_fortran write|read|init CODE|elastic-write|elastic-read|elastic-refuse"
        call MPI_Abort(MPI_COMM_WORLD, 2, ierr)
    end select

    if (rank == 0) write (*, '(i0, " passed, ", i0, " failed")') passed, failed
    call MPI_Finalize(ierr)
    if (failed > 0) error stop 1

contains

    subroutine check(ok, what)
        logical, intent(in) :: ok
        character(len=*), intent(in) :: what
        if (ok) then
            passed = passed + 1
        else
            failed = failed + 1
            write (*, '("FAIL (rank ", i0, "): ", a)') rank, what
        end if
    end subroutine check

    subroutine fill(seed)
        integer, intent(in) :: seed
        integer :: k
        r4_0 = 1.5 + seed
        r4_1 = [1.0, 2.0, 3.0] * seed
        r4_2 = reshape([1, 2, 3, 4, 5, 6] * 0.25 * seed, [2, 3])
        r4_3 = reshape([1, 2, 3, 4, 5, 6, 7, 8] * 0.5 * seed, [2, 2, 2])
        r8_0 = 1d0 / 3 + seed
        r8_1 = [1d0, 2d0, 3d0] / 7 * seed
        r8_2 = reshape([1, 2, 3, 4, 5, 6] / 11d0 * seed, [2, 3])
        r8_3 = reshape([1, 2, 3, 4, 5, 6, 7, 8] / 13d0 * seed, [2, 2, 2])
        i4_0 = -2147483647 + seed
        i4_1 = [1, 2, 3] * seed
        i4_2 = reshape([1, 2, 3, 4, 5, 6] * seed, [2, 3])
        i4_3 = reshape([1, 2, 3, 4, 5, 6, 7, 8] * seed, [2, 2, 2])
        i8_0 = 9000000000000000000_c_int64_t + seed
        i8_1 = [1, 2, 3] * 5000000000_c_int64_t * seed
        i8_2 = reshape([1, 2, 3, 4, 5, 6] * 5000000000_c_int64_t * seed, [2, 3])
        i8_3 = reshape([1, 2, 3, 4, 5, 6, 7, 8] * 5000000000_c_int64_t * seed, [2, 2, 2])
        c8_0 = cmplx(seed, -seed, c_double)
        c8_1 = cmplx([1, 2, 3], seed, c_double)
        c8_2 = reshape(cmplx([1, 2, 3, 4, 5, 6], -seed, c_double), [2, 3])
        c8_3 = reshape(cmplx([1, 2, 3, 4, 5, 6, 7, 8], 2 * seed, c_double), [2, 2, 2])
        l_0 = mod(seed, 2) == 0
        l_1 = [.true., .false., mod(seed, 2) == 1]
        l_2 = reshape([(mod(seed + k, 3) == 0, k = 1, 6)], [2, 3])
        l_3 = reshape([(mod(seed + k, 2) == 0, k = 1, 8)], [2, 2, 2])
        u = reshape([(k * 0.125d0 + seed, k = 1, size(u))], shape(u))
        flags = reshape([(k * seed - 3, k = 1, size(flags))], shape(flags))
    end subroutine fill

    ! The even split of n items over parts: part p's first (from 0) and count.
    subroutine split(n, parts, p, start, cnt)
        integer, intent(in) :: n, parts, p
        integer, intent(out) :: start, cnt
        cnt = n / parts
        if (p < mod(n, parts)) cnt = cnt + 1
        start = p * (n / parts) + min(p, mod(n, parts))
    end subroutine split

    ! Element values by global index: the block's from its index, the box's from its
    ! row and column.
    subroutine fill_elastic()
        integer :: i, j
        do i = 1, size(blk)
            blk(i) = first + i - 1 + 0.5d0
        end do
        do j = 1, cols
            do i = 1, ROWS
                box(i, j) = 1000 * i + col0 + j - 1
            end do
        end do
        step = 42
        params = [0.25d0, -3d0, 7d0]
    end subroutine fill_elastic

    logical function elastic_same()
        real(c_double), allocatable :: b(:)
        integer(c_int32_t), allocatable :: x(:, :)
        allocate (b, source=blk)
        allocate (x, source=box)
        elastic_same = step == 42 .and. all(params == [0.25d0, -3d0, 7d0])
        call fill_elastic()
        elastic_same = elastic_same .and. all(b == blk) .and. all(x == box)
    end function elastic_same

    logical function same(seed)
        integer, intent(in) :: seed
        real(c_float) :: r4(1 + 3 + 6 + 8)
        real(c_double) :: r8(1 + 3 + 6 + 8)
        integer(c_int32_t) :: i4(18)
        integer(c_int64_t) :: i8(18)
        complex(c_double_complex) :: c8(18)
        logical :: l(18)
        real(c_double) :: u_was(size(u))
        integer(c_int32_t) :: flags_was(size(flags))
        u_was = reshape(u, [size(u)])
        flags_was = reshape(flags, [size(flags)])
        r4 = [r4_0, r4_1, reshape(r4_2, [6]), reshape(r4_3, [8])]
        r8 = [r8_0, r8_1, reshape(r8_2, [6]), reshape(r8_3, [8])]
        i4 = [i4_0, i4_1, reshape(i4_2, [6]), reshape(i4_3, [8])]
        i8 = [i8_0, i8_1, reshape(i8_2, [6]), reshape(i8_3, [8])]
        c8 = [c8_0, c8_1, reshape(c8_2, [6]), reshape(c8_3, [8])]
        l = [l_0, l_1, reshape(l_2, [6]), reshape(l_3, [8])]
        call fill(seed)
        same = all(r4 == [r4_0, r4_1, reshape(r4_2, [6]), reshape(r4_3, [8])]) .and. &
            all(r8 == [r8_0, r8_1, reshape(r8_2, [6]), reshape(r8_3, [8])]) .and. &
            all(i4 == [i4_0, i4_1, reshape(i4_2, [6]), reshape(i4_3, [8])]) .and. &
            all(i8 == [i8_0, i8_1, reshape(i8_2, [6]), reshape(i8_3, [8])]) .and. &
            all(c8 == [c8_0, c8_1, reshape(c8_2, [6]), reshape(c8_3, [8])]) .and. &
            all(l .eqv. [l_0, l_1, reshape(l_2, [6]), reshape(l_3, [8])]) .and. &
            all(u_was == reshape(u, [size(u)])) .and. all(flags_was == reshape(flags, [size(flags)]))
    end function same

    ! Ids 1-4 real(4) of rank 0-3, 5-8 real(8), 9-12 integer(4), 13-16 integer(8),
    ! 17-20 complex(8), 21-24 logical; 25 the module's real(8) of rank 5, 26 its
    ! integer(4) of rank 7.
    subroutine protect_all(ierr)
        integer, intent(out) :: ierr
        integer :: e(26)
        call shoal_protect(1, r4_0, e(1))
        call shoal_protect(2, r4_1, e(2))
        call shoal_protect(3, r4_2, e(3))
        call shoal_protect(4, r4_3, e(4))
        call shoal_protect(5, r8_0, e(5))
        call shoal_protect(6, r8_1, e(6))
        call shoal_protect(7, r8_2, e(7))
        call shoal_protect(8, r8_3, e(8))
        call shoal_protect(9, i4_0, e(9))
        call shoal_protect(10, i4_1, e(10))
        call shoal_protect(11, i4_2, e(11))
        call shoal_protect(12, i4_3, e(12))
        call shoal_protect(13, i8_0, e(13))
        call shoal_protect(14, i8_1, e(14))
        call shoal_protect(15, i8_2, e(15))
        call shoal_protect(16, i8_3, e(16))
        call shoal_protect(17, c8_0, e(17))
        call shoal_protect(18, c8_1, e(18))
        call shoal_protect(19, c8_2, e(19))
        call shoal_protect(20, c8_3, e(20))
        call shoal_protect(21, l_0, e(21))
        call shoal_protect(22, l_1, e(22))
        call shoal_protect(23, l_2, e(23))
        call shoal_protect(24, l_3, e(24))
        call shoal_protect(25, u, e(25))
        call shoal_protect(26, flags, e(26))
        ierr = minval(e)
    end subroutine protect_all

end program test_fortran
