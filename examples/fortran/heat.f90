! heat - examples/heat.c in Fortran: 2-D heat diffusion by Jacobi iteration, rows split
! across the ranks, checkpointed with the shoal module.
!
!   heat [--size N] [--steps S] [--pace US]
!
! It computes the same values in the same order as the C program, so it prints the same
! `checksum:` line for the same size and steps. The grid is stored as g(column, row), which
! lays it out in memory as the C program's rows, so its shards hold the same bytes too.
!
! Shoal: the step counter is protected as replicated (the same on every rank) and the
! grid's interior rows as this rank's block of the global grid (both declared target, so
! that the library may keep their addresses), and shoal_snapshot is called at the start
! of every step, so that a checkpoint restores onto any number of ranks. The loop is a do
! while on the protected counter: a counted do loop fixes its trip count when it starts,
! and restoring its variable would not resume it.
program heat
    use mpi
    use shoal
    use, intrinsic :: iso_c_binding, only: c_int, c_double, c_int64_t
    use, intrinsic :: iso_fortran_env, only: error_unit
    implicit none

    interface
        integer(c_int) function usleep(us) bind(c, name="usleep")
            import :: c_int
            integer(c_int), value :: us
        end function usleep
    end interface

    integer, parameter :: ID_STEP = 1, ID_GRID = 2
    integer :: size_n, steps, pace
    integer :: rank, nranks, ierr, first, rows, up, down, w, report_every
    integer, target :: step
    real(8), pointer :: grid(:, :), next(:, :), swap(:, :)
    real(8) :: start, step_start, seconds, total
    logical :: restarted, ok
    character(len=16) :: buf

    call MPI_Init(ierr)
    call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
    call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)

    call parse_options(ok)
    if (.not. ok .or. size_n < nranks) then
        if (rank == 0) write (error_unit, '(a)') &
            "usage: heat [--size N] [--steps S] [--pace US]  (N >= number of ranks)"
        call MPI_Finalize(ierr)
        stop 2
    end if
    call shoal_init(MPI_COMM_WORLD)
    restarted = shoal_status() /= SHOAL_FRESH

    call make_block(size_n, rank, nranks, first, rows)
    up = merge(rank - 1, MPI_PROC_NULL, rank > 0)
    down = merge(rank + 1, MPI_PROC_NULL, rank < nranks - 1)
    w = size_n + 2
    allocate (grid(0:size_n + 1, 0:rows + 1), next(0:size_n + 1, 0:rows + 1))
    call init_grid(grid)
    call init_grid(next)
    if (rank == 0) write (*, '("heat: ", i0, " x ", i0, " points, ", i0, " steps, ", i0, " ranks")') &
        size_n, size_n, steps, nranks

    step = 0
    call shoal_protect_replicated(ID_STEP, step)
    start = MPI_Wtime()
    report_every = 1
    if (steps >= 10) report_every = steps / 10
    do while (step < steps)
        step_start = MPI_Wtime()
        ! The buffers swap roles every step: point the grid region at the current one, its
        ! interior rows, global rows first .. first + rows - 1 of the plate's size_n.
        call shoal_protect_block(ID_GRID, grid(:, 1:rows), int(size_n, c_int64_t) * w, &
            int(first - 1, c_int64_t) * w)
        call shoal_snapshot()
        if (restarted .and. rank == 0) write (*, '("heat: resumed at step ", i0)') step
        restarted = .false.

        call exchange_halos(grid)
        call sweep(grid, next)
        swap => grid
        grid => next
        next => swap

        step = step + 1
        call shoal_progress(real(step, c_double) / steps)
        if (rank == 0 .and. mod(step, report_every) == 0) &
            write (*, '("step ", i0, " of ", i0)') step, steps
        call pace_wait(step_start, pace)
    end do
    seconds = MPI_Wtime() - start

    total = checksum(grid)
    call shoal_finalize()
    if (rank == 0) then
        write (buf, '(f12.2)') seconds
        write (*, '("time: ", a, " s")') trim(adjustl(buf))
        write (*, '("checksum: ", a)') c_style_e15(total)
    end if
    deallocate (grid, next)
    call MPI_Finalize(ierr)

contains

    subroutine parse_options(ok)
        logical, intent(out) :: ok
        character(len=64) :: name, value
        integer :: i, v, stat
        size_n = 2048
        steps = 5000
        pace = 0
        ok = .false.
        i = 1
        do while (i <= command_argument_count())
            call get_command_argument(i, name)
            if (i == command_argument_count()) return
            call get_command_argument(i + 1, value)
            read (value, *, iostat=stat) v
            if (stat /= 0 .or. v < 0 .or. v > 1000000000 .or. verify(trim(value), "0123456789") /= 0) return
            select case (name)
            case ("--size")
                size_n = v
            case ("--steps")
                steps = v
            case ("--pace")
                pace = v
            case default
                return
            end select
            i = i + 2
        end do
        ok = size_n >= 1
    end subroutine parse_options

    subroutine make_block(n, r, nr, first, rows)
        integer, intent(in) :: n, r, nr
        integer, intent(out) :: first, rows
        integer :: base, extra
        base = n / nr
        extra = mod(n, nr)
        rows = base
        if (r < extra) rows = rows + 1
        first = 1 + r * base + min(r, extra)
    end subroutine make_block

    real(8) function edge_temperature(global_row, global_col, n)
        integer, intent(in) :: global_row, global_col, n
        edge_temperature = 0d0
        if (global_row == 0) then
            edge_temperature = 100d0
        else if (global_col == 0) then
            edge_temperature = 100d0 * (1d0 - dble(global_row) / dble(n + 1))
        end if
    end function edge_temperature

    ! Edges hold their fixed values, the interior 0. The ghost rows at the plate's top and
    ! bottom edge are never overwritten: MPI_Sendrecv with MPI_PROC_NULL leaves them alone.
    subroutine init_grid(g)
        real(8), intent(out) :: g(0:, 0:)
        integer :: i, j, gi
        do i = 0, rows + 1
            gi = first - 1 + i
            do j = 0, size_n + 1
                if (gi == 0 .or. gi == size_n + 1 .or. j == 0 .or. j == size_n + 1) then
                    g(j, i) = edge_temperature(gi, j, size_n)
                else
                    g(j, i) = 0d0
                end if
            end do
        end do
    end subroutine init_grid

    subroutine exchange_halos(g)
        real(8), intent(inout) :: g(0:, 0:)
        integer :: ierr
        call MPI_Sendrecv(g(:, 1), w, MPI_DOUBLE_PRECISION, up, 0, g(:, rows + 1), w, &
            MPI_DOUBLE_PRECISION, down, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
        call MPI_Sendrecv(g(:, rows), w, MPI_DOUBLE_PRECISION, down, 1, g(:, 0), w, &
            MPI_DOUBLE_PRECISION, up, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
    end subroutine exchange_halos

    subroutine sweep(g, out)
        real(8), intent(in) :: g(0:, 0:)
        real(8), intent(inout) :: out(0:, 0:)
        integer :: i, j
        do i = 1, rows
            do j = 1, size_n
                ! The C program's order of additions, so that the sums are bit for bit equal.
                out(j, i) = 0.25d0 * (((g(j, i - 1) + g(j, i + 1)) + g(j - 1, i)) + g(j + 1, i))
            end do
        end do
    end subroutine sweep

    ! Each rank sums its rows left to right; rank 0 adds the row sums in global row order.
    real(8) function checksum(g)
        real(8), intent(in) :: g(0:, 0:)
        real(8), allocatable :: row_sums(:), all(:)
        integer, allocatable :: counts(:), displs(:)
        integer :: i, j, r, f, n, ierr
        real(8) :: s
        allocate (row_sums(max(rows, 1)), all(size_n), counts(nranks), displs(nranks))
        do i = 1, rows
            s = 0d0
            do j = 1, size_n
                s = s + g(j, i)
            end do
            row_sums(i) = s
        end do
        do r = 0, nranks - 1
            call make_block(size_n, r, nranks, f, n)
            counts(r + 1) = n
            displs(r + 1) = f - 1
        end do
        call MPI_Gatherv(row_sums, rows, MPI_DOUBLE_PRECISION, all, counts, displs, &
            MPI_DOUBLE_PRECISION, 0, MPI_COMM_WORLD, ierr)
        checksum = 0d0
        if (rank == 0) then
            do i = 1, size_n
                checksum = checksum + all(i)
            end do
        end if
    end function checksum

    ! x as C's printf("%.15e") writes it, so that the C and Fortran lines compare equal.
    function c_style_e15(x) result(s)
        real(8), intent(in) :: x
        character(len=:), allocatable :: s
        character(len=32) :: buf
        integer :: e
        write (buf, '(es24.15e3)') x
        s = trim(adjustl(buf))
        e = index(s, "E")
        ! Fortran writes E+003 or E+123; C writes e+03 or e+123.
        if (s(e + 2:e + 2) == "0") then
            s = s(:e - 1) // "e" // s(e + 1:e + 1) // s(e + 3:)
        else
            s = s(:e - 1) // "e" // s(e + 1:)
        end if
    end function c_style_e15

    ! Sleeps until pace_us microseconds have passed since start (an MPI_Wtime value).
    subroutine pace_wait(start, pace_us)
        real(8), intent(in) :: start
        integer, intent(in) :: pace_us
        real(8) :: left
        integer(c_int) :: rc
        left = start + pace_us * 1d-6 - MPI_Wtime()
        if (pace_us <= 0 .or. left <= 0) return
        rc = usleep(int(left * 1d6, c_int))
    end subroutine pace_wait

end program heat
